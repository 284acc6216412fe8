# bench/real/gen_sql.awk — writes the SQL script of the real_sqlite row.
# Usage: awk -v n=ROWS -f gen_sql.awk > script.sql
# Deterministic (fixed LCG): the same n gives the same script, so every
# allocator runs the same statements. Shape: a table of n rows inserted in
# batches of 500 per transaction with text of 8-300 bytes, two indexes, grouped
# and joined queries, updates that grow the text of id ranges, deletes of id ranges, and a VACUUM
# that rebuilds the lot. Every statement ends with ";" at the end of its line,
# which is how the wrapper counts them.
function rnd(m) { seed = (seed * 16807) % 2147483647; return int(seed / 64) % m }
function word(len,   s, i) { s = ""; for (i = 0; i < len; i++) s = s substr(alpha, 1 + rnd(26), 1); return s }
BEGIN {
  seed = 42; alpha = "abcdefghijklmnopqrstuvwxyz"
  print "PRAGMA cache_size=-65536;"
  print "CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, grp INTEGER, price REAL, body TEXT);"
  print "CREATE TABLE grp(id INTEGER PRIMARY KEY, label TEXT);"
  print "BEGIN;"
  for (g = 0; g < 100; g++) printf "INSERT INTO grp VALUES(%d,'%s');\n", g, word(6 + rnd(20))
  for (i = 1; i <= n; i++) {
    printf "INSERT INTO item(name,grp,price,body) VALUES('%s',%d,%d.%02d,'%s');\n",
           word(4 + rnd(12)), rnd(100), rnd(1000), rnd(100), word(8 + rnd(rnd(4) ? 40 : 300))
    if (i % 500 == 0) { print "COMMIT;"; print "BEGIN;" }
  }
  print "COMMIT;"
  print "CREATE INDEX item_grp ON item(grp, price);"
  print "CREATE INDEX item_name ON item(name);"
  q = 100 # fixed: the queries scan ranges that grow with n
  for (k = 0; k < q; k++) {
    printf "SELECT g.label, count(*), sum(i.price), max(length(i.body)) FROM item i JOIN grp g ON g.id = i.grp WHERE i.grp BETWEEN %d AND %d GROUP BY g.label ORDER BY 2 DESC;\n", k % 100, k % 100 + 5
    w = word(2); printf "SELECT name, group_concat(substr(body,1,8), ',') FROM item WHERE name >= '%s' AND name < '%sz' GROUP BY name ORDER BY name LIMIT 50;\n", w, w
  }
  print "BEGIN;"
  for (k = 0; k < q * 4; k++)
    { a = 1 + rnd(n); printf "UPDATE item SET body = body || '%s', price = price * 1.01 WHERE id BETWEEN %d AND %d;\n", word(10 + rnd(60)), a, a + 40 }
  print "COMMIT;"
  print "BEGIN;"
  for (k = 0; k < q * 4; k++) { a = 1 + rnd(n); printf "DELETE FROM item WHERE id BETWEEN %d AND %d AND grp < 66;\n", a, a + 30 }
  print "COMMIT;"
  print "SELECT count(*), sum(length(body)) FROM item;"
  print "SELECT grp, count(*) FROM (SELECT DISTINCT grp, name FROM item) GROUP BY grp ORDER BY 2 DESC LIMIT 5;"
  print "VACUUM;"
  print "SELECT count(*), total(price) FROM item;"
}
