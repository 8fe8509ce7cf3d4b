# Allocation-heavy Ruby for the `real` benchmark group (bench/run.py). Ruby keeps its
# objects in its own GC heap pages, which it takes from malloc (posix_memalign), and
# every string or array longer than fits in a slot, every hash's table and every
# instance-variable table are malloc'd buffers: this churns those, with a sliding window
# of live objects so that blocks of every age are freed and the GC runs throughout.
# Prints `checksum N`, which depends only on the work; bench/run.py checks it.
#
#     ruby ruby.rb [ROUNDS]

Record = Struct.new(:key, :value, :tags, :children)

def churn(rounds)
  checksum = 0
  window = []
  index = {}
  rounds.times do |r|
    batch = []
    200.times do |i|
      key = "record-with-a-longer-name-#{r}-#{i}"
      rec = Record.new(key, i * r, [key[-3..], (i % 7).to_s] * (i % 5 + 1), [])
      batch[(i * 7) % batch.size].children << rec if !batch.empty? && i % 3 != 0
      batch << rec
      index[key] = rec
    end
    groups = Hash.new { |h, k| h[k] = [] }
    batch.each { |rec| groups[rec.tags[0]] << rec.value }
    flat = groups.keys.sort.flat_map { |k| groups[k] }
    checksum = (checksum * 31 + flat.sum + groups.size) % 1_000_000_007
    text = batch.each_slice(4).map { |s| s[0].key }.join(" ")
    joined = text.split.map(&:upcase).join("|")
    checksum = (checksum + joined.size + joined.scan("RECORD").size) % 1_000_000_007
    pairs = batch.map { |rec| [rec.children.size, rec.value, rec.key] }
                 .sort_by { |p| [-p[0], p[1]] }
    checksum = (checksum * 7 + pairs[0][0] * 1000 + pairs[-1][1]) % 1_000_000_007
    window << batch
    window.shift.each { |rec| index.delete(rec.key) } if window.size > 100
    checksum = (checksum + index.size) % 1_000_000_007
  end
  checksum
end

puts "checksum #{churn((ARGV[0] || 2000).to_i)}"
