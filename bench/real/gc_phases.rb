# bench/real/gc_phases.rb — the workload of the real_ruby row.
# Usage: ruby gc_phases.rb ROUNDS
# A Ruby program that goes through phases, as programs do (load, then
# parse, then render): each phase builds many strings of one size range and
# keeps one in ten of them when it ends, so the garbage collector frees nine
# blocks in ten of a size the program then stops asking for; then four
# threads each keep a sliding window of strings of every size. Peak RSS is
# what an allocator that can reuse or return freed memory across sizes
# saves. Prints a checksum and the number of strings built (the wrapper's ops).
rounds = (ARGV[0] || 1).to_i
sizes = [40, 90, 200, 500, 1200, 3000, 150, 700]
keep = []
built = 0
check = 0
rounds.times do |r|
  sizes.each_with_index do |sz, ph|
    a = Array.new(150_000) { |i| "x" * (sz + (i * 7 + ph) % 32) }
    built += a.size
    keep.concat(a.each_slice(10).map(&:first))
    check = (check * 31 + a[a.size / 2].size) % 1_000_000_007
    a = nil
    GC.start
  end
  keep = keep.last(200_000)
end
t = (1..4).map do |k|
  Thread.new do
    x = []
    n = 0
    50_000.times do |i|
      x << ("y" * ((i * k) % 2000))
      x.shift if x.size > 5000
      n += 1
    end
    [n, x.map(&:size).sum]
  end
end
t.map(&:value).each { |n, s| built += n; check = (check * 31 + s) % 1_000_000_007 }
puts "check=#{check} kept=#{keep.size}"
puts "strings=#{built}"
