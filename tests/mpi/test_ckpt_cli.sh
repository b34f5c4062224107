# Shell cases for the checkpoint command line (run by tests/mpi/ckpt-cli-np3.sh
# through tests/lib/run-cases). Checkpoints come from tests/cluster/ckpt_worker
# under mpirun with 3 ranks; JSON is parsed with Perl's JSON::PP.

BATON=${BATON_BUILD_DIR:?}/cli/baton
WORKER=$BATON_BUILD_DIR/tests/cluster/ckpt_worker

# saves DIR N [ARGS...]: N saves (steps 1..N on an empty DIR) by 3 ranks.
saves() {
  local dir=$1 n=$2
  shift 2
  "$REPO/tests/lib/mpirun-ranks" 3 "$WORKER" --dir "$dir" --saves "$n" "$@" >/dev/null
}

scratch() { mktemp -d "${BATON_TEST_RESULTS}/ckpt-cli.XXXXXX"; }

# json_field FIELD: FIELD of every object of the JSON list on stdin, one per line.
json_field() { perl -MJSON::PP -e 'print "$_->{'"$1"'}\n" for @{ decode_json(join "", <STDIN>) }'; }

newest_shard() { ls "$1"/$(ls "$1" | grep '^v' | sort | tail -n 1)/*.h5 | head -n 1; }

test_ls_json_lists_every_version_with_the_documented_fields() {
  local d out
  d=$(scratch)
  saves "$d" 2
  out=$("$BATON" ckpt ls "$d" --json)
  echo "$out" | perl -MJSON::PP -e '
    my $l = decode_json(join "", <STDIN>);
    @$l == 2 or die scalar(@$l) . " versions, expected 2";
    my $i = 0;
    for my $v (@$l) {
      $i++;
      for my $k (qw(step path time world_size bytes status levels)) { exists $v->{$k} or die "no $k" }
      $v->{step} == $i or die "step $v->{step}, expected $i";
      $v->{status} eq "complete" or die "status $v->{status}";
      $v->{world_size} == 3 or die "world_size $v->{world_size}";
      # w: 4096 x 64 f32, opt: 1000 i64
      $v->{bytes} == 4096 * 64 * 4 + 8000 or die "bytes $v->{bytes}";
      join(",", @{ $v->{levels} }) eq "shared" or die "levels";
    }'
  "$BATON" ckpt ls "$d" | grep -q 'complete' || fail "table output lacks the status"
}

test_ls_shows_a_crashed_save_as_incomplete() {
  local d
  d=$(scratch)
  saves "$d" 1
  mkdir -m 700 "$d/v00000009-s7"
  expect_eq "$("$BATON" ckpt ls "$d" --json | json_field status | tr '\n' ' ')" "complete incomplete " "statuses"
}

test_inspect_lists_arrays_and_shards() {
  local d out
  d=$(scratch)
  saves "$d" 1
  out=$("$BATON" ckpt inspect "$d")
  echo "$out" | grep -qE '^w +f32 +sharded +\[4096, 64\]' || fail "inspect: no line for w: $out"
  echo "$out" | grep -qE '^opt +i64 +replicated +\[1000\]' || fail "inspect: no line for opt: $out"
  echo "$out" | grep -qE '^shard.*0-2$' || fail "inspect: no shard of ranks 0-2 (one node): $out"
  "$BATON" ckpt inspect "$d" --json | perl -MJSON::PP -e '
    my $j = decode_json(<STDIN>); $j->{step} == 1 && @{ $j->{arrays} } == 2 or die "inspect json"'
}

test_verify_passes_then_detects_a_flipped_bit_and_names_the_file() {
  local d shard out rc
  d=$(scratch)
  saves "$d" 1 --group-size 1
  "$BATON" ckpt verify "$d" --no-progress | grep -q '^ok ' || fail "verify of a good version did not say ok"
  shard=$(newest_shard "$d")
  # Flip one bit in the middle of the file: inside the rows of w, which
  # fill most of it (HDF5's own metadata sits at the start and the end).
  perl -e 'open(my $f, "+<", $ARGV[0]) or die; my $n = int((-s $f) / 2); seek($f, $n, 0); read($f, my $b, 1);
           seek($f, $n, 0); print $f chr(ord($b) ^ 1); close $f' "$shard"
  rc=0; out=$("$BATON" ckpt verify "$d" --no-progress) || rc=$?
  expect_eq "$rc" 1 "verify exit status after a flipped bit"
  echo "$out" | grep -q "FAILED" || fail "no FAILED line: $out"
  echo "$out" | grep -q "$(basename "$shard")" || fail "the damaged file is not named: $out"
}

test_verify_detects_a_truncated_shard() {
  local d shard rc out
  d=$(scratch)
  saves "$d" 1
  shard=$(newest_shard "$d")
  truncate -s $(( $(stat -c %s "$shard") / 2 )) "$shard"
  rc=0; out=$("$BATON" ckpt verify "$d" --no-progress 2>&1) || rc=$?
  expect_eq "$rc" 1 "verify exit status after truncation"
  echo "$out" | grep -q "$(basename "$shard")" || fail "the truncated file is not named: $out"
}

test_gc_keeps_the_newest_k_and_removes_crashed_saves() {
  local d
  d=$(scratch)
  saves "$d" 5
  mkdir -m 700 "$d/v00000002-s99"  # older than the newest complete: a crashed save
  "$BATON" ckpt gc "$d" --keep 2 --dry-run >/dev/null
  # The Checkpointer's own retention (keep 3) already ran after each save.
  expect_eq "$(ls "$d" | grep -c '^v')" 4 "versions after --dry-run"
  "$BATON" ckpt gc "$d" --keep 2
  expect_eq "$("$BATON" ckpt ls "$d" --json | json_field step | tr '\n' ' ')" "4 5 " "steps kept"
}

test_a_hostile_manifest_is_reported_not_crashed_on() {
  local d m rc out
  d=$(scratch)
  saves "$d" 1
  m=$(ls "$d"/v*/manifest.json | head -n 1)
  printf '{"format": 1, "step": "not a number"' >"$m"
  "$BATON" ckpt ls "$d" --json | grep -q '"error"' || fail "ls does not report the broken manifest"
  rc=0; out=$("$BATON" ckpt verify "$d" --no-progress 2>&1) || rc=$?
  expect_eq "$rc" 1 "verify exit status on a malformed manifest"
  echo "$out" | grep -q 'manifest.json' || fail "the manifest is not named: $out"
}

test_bad_options_are_named() {
  local d rc out
  d=$(scratch)
  for args in "gc $d --keep 0" "gc $d" "ls $d --step -3" "frobnicate" "inspect $d --nope"; do
    rc=0; out=$("$BATON" ckpt $args 2>&1) || rc=$?
    expect_eq "$rc" 2 "exit status of 'baton ckpt $args'"
    [ -n "$out" ] || fail "no message for 'baton ckpt $args'"
  done
  rc=0; out=$(env -u BATON_CKPT_DIR "$BATON" ckpt ls 2>&1) || rc=$?
  expect_eq "$rc" 2 "exit status without a directory"
  echo "$out" | grep -q BATON_CKPT_DIR || fail "the message does not say how to name a directory: $out"
  rc=0; out=$("$BATON" ckpt inspect "$d/does-not-exist" 2>&1) || rc=$?
  expect_eq "$rc" 1 "exit status for a missing directory"
  echo "$out" | grep -q "does-not-exist" || fail "the missing directory is not named: $out"
}

test_bench_ckpt_json_has_the_documented_fields() {
  local d out
  d=$(scratch)
  out=$("$REPO/tests/lib/mpirun-ranks" 3 "$BATON" bench ckpt --dir "$d" --bytes 6M --arrays 2 --reps 2 --json)
  echo "$out" | perl -MJSON::PP -e '
    my %seen;
    while (my $line = <STDIN>) {
      my $j = decode_json($line);
      for my $k (qw(op bytes ranks group_size seconds GBps raw_GBps ratio)) { exists $j->{$k} or die "no $k" }
      $j->{ranks} == 3 or die "ranks $j->{ranks}";
      $j->{seconds} > 0 && $j->{GBps} > 0 && $j->{raw_GBps} > 0 or die "not positive: $line";
      abs($j->{ratio} - $j->{GBps} / $j->{raw_GBps}) < 1e-9 * $j->{ratio} or die "ratio";
      $seen{$j->{op}}++;
    }
    $seen{save} == 1 && $seen{restore} == 1 or die "expected one save and one restore line"'
  expect_eq "$(ls -A "$d")" "" "what bench ckpt left without --no-cleanup"
}
