#!/bin/sh
# The `real` benchmark group's redis workload (bench/run.py), run by build/bench/realrun
# with LD_PRELOAD set: starts redis-server (which inherits the preload) on a unix socket
# in DIR, fills it with DEBUG POPULATE, drives it with redis-benchmark (random keys,
# 100-byte values, pipelined) and checks that the populated keys are all there and
# intact, then shuts it down. The clients run without the preload and outside the
# binding trace (LD_DEBUG): only the server's heap is being measured. Prints the lines
# the check needs (never timing); bench/run.py compares them with the known answer.
#
#     redis.sh DIR KEYS REQUESTS
set -eu
dir=$1 keys=$2 requests=$3
sock=$dir/redis.sock
rm -f "$sock"
redis-server --port 0 --unixsocket "$sock" --save "" --appendonly no --logfile "$dir/redis.log" \
    --enable-debug-command local --dir "$dir" --daemonize no --loglevel warning &
server=$!
cli() { env -u LD_PRELOAD -u LD_DEBUG redis-cli -s "$sock" "$@"; }
tries=0
until [ -S "$sock" ] && cli ping >/dev/null 2>&1; do
    tries=$((tries + 1))
    if [ $tries -gt 500 ]; then
        echo "redis.sh: redis-server did not start" >&2
        kill $server
        exit 1
    fi
    sleep 0.01
done
cli debug populate "$keys" key 100 >/dev/null
env -u LD_PRELOAD -u LD_DEBUG redis-benchmark -s "$sock" -n "$requests" -r 100000 -d 100 \
    -c 8 -P 16 -q -t set,get,lpush,lpop,sadd,hset,incr >/dev/null
# DEBUG POPULATE's values are "value:N" padded with zero bytes to the size given
check="local n = 0
for i = 0, $keys - 1 do
    local v, want = redis.call('get', 'key:' .. i), 'value:' .. i
    if v and #v == 100 and string.sub(v, 1, #want) == want then n = n + 1 end
end
return n"
echo "intact $(cli eval "$check" 0) of $keys"
cli shutdown nosave >/dev/null 2>&1 || true
wait $server
