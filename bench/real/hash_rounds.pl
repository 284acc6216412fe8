# bench/real/hash_rounds.pl — the workload of the real_perl and
# real_perl_16t rows.
# Usage: perl hash_rounds.pl THREADS ROUNDS ENTRIES
# A Perl program that works in rounds, as report generators and log
# crunchers do: each round builds a hash of ENTRIES keys (strings of 8 to
# 60 bytes) whose values are small arrays and hashes, sorts the keys,
# joins and splits part of them, deletes the keys that match a pattern,
# and drops the rest when the round ends; the next round builds it again.
# Perl (usemymalloc=n, as Debian builds it) asks malloc for every string
# body, array and hash, and frees them as their counts drop. A round takes
# longer than an allocator's decay window, so an allocator that returns
# memory by time alone gives the round's memory back while the next round
# is about to need it (page faults, not peak RSS). With THREADS > 1 the
# rounds run in as many ithreads (each an interpreter of its own) at once.
# Prints a checksum and the number of entries built (the wrapper's ops).
use strict;
use warnings;

my ($threads, $rounds, $n) = (@ARGV, 1, 4, 20000)[0 .. 2];
$threads ||= 1;

sub work {
  my ($id) = @_;
  my ($built, $check) = (0, 0);
  for my $r (1 .. $rounds) {
    my %h;
    for my $i (1 .. $n) {
      my $k = "k$id.$r." . $i . ("z" x ($i % 50));
      $h{$k} = [$i, sprintf("%08d-%s", $i, $k), { a => $i, b => "v" . ($i * 7 % 1000) }];
    }
    $built += $n;
    my @keys = sort keys %h;
    my @parts = split /,/, join(",", @keys[0 .. ($#keys < 2000 ? $#keys : 2000)]);
    $check = ($check * 31 + scalar(@parts) + length($keys[$#keys / 2])) % 1000000007;
    for my $k (@keys) { delete $h{$k} if $k =~ /3/; }
    $check = ($check * 31 + scalar(keys %h)) % 1000000007;
  }
  return "$built $check";
}

my ($built, $check) = (0, 0);
if ($threads > 1) {
  require threads;
  my @t = map { threads->create(\&work, $_) } 1 .. $threads;
  for my $t (@t) {
    my ($b, $c) = split / /, $t->join;
    $built += $b;
    $check = ($check * 31 + $c) % 1000000007;
  }
} else {
  ($built, $check) = split / /, work(1);
}
print "check=$check\n";
print "entries=$built\n";
