-- The `real` benchmark group's sqlite3 workload (bench/run.py): builds a table of
-- generated rows in an in-memory database, indexes it twice, updates and deletes a
-- share of it and answers a few queries. sqlite3 takes its page cache, its parse trees
-- and every row it handles from malloc. The output depends only on the data;
-- bench/run.py checks it against sqlite.expected.
--     sqlite3 :memory: '.read sqlite.sql'
PRAGMA cache_size = -65536;
CREATE TABLE item (id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, price INTEGER, note TEXT);
WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < 200000)
INSERT INTO item (id, grp, name, price, note)
SELECT n, (n * 7919) % 1000, printf('item-%08d', (n * 104729) % 1000003),
       (n * 31337) % 10007, substr('abcdefghijklmnopqrstuvwxyz', 1 + n % 26) || n
FROM seq;
CREATE INDEX item_grp ON item (grp, price);
CREATE INDEX item_name ON item (name);
UPDATE item SET price = price + 1 WHERE grp % 3 = 0;
DELETE FROM item WHERE price % 11 = 0;
SELECT count(*), sum(price), max(name) FROM item;
SELECT grp, count(*), sum(price) FROM item WHERE grp BETWEEN 100 AND 104 GROUP BY grp;
SELECT name, price FROM item WHERE name LIKE 'item-0000%' ORDER BY name LIMIT 5;
SELECT count(DISTINCT note), sum(length(note)) FROM item;
SELECT a.grp, count(*) FROM item a JOIN item b ON b.grp = a.grp AND b.price BETWEEN a.price + 1 AND a.price + 100
GROUP BY a.grp ORDER BY 2 DESC, 1 LIMIT 3;
