# shellcheck shell=bash
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

# level2_saves DIR LOCAL N: N saves by 3 ranks with level 2 in LOCAL, each
# rank a "node" of its own (BATON_CKPT_TEST_RANKS_PER_NODE), so node k's
# partner copies are node k-1's (ckpt/level2_save.cc). The nodes share this
# machine's disk: LOCAL holds every node's files (node_view picks one's).
level2_saves() {
  local dir=$1 local_dir=$2 n=$3
  "$REPO/tests/lib/mpirun-ranks" 3 -x BATON_CKPT_TEST_RANKS_PER_NODE=1 "$WORKER" --dir "$dir" --saves "$n" \
    --local-dir "$local_dir" >/dev/null
}

# node_view VERSION K: leaves in level-2 version directory VERSION what node
# K of 3 would hold: its own shard-K and, in partner/, node K-1's copy.
node_view() {
  local v=$1 k=$2 r prev=$(( ($2 + 2) % 3 ))
  for r in 0 1 2; do
    [ "$r" = "$k" ] || rm -f "$v/shard-$r.h5" "$v/shard-$r.json"
    [ "$r" = "$prev" ] || rm -f "$v/partner/shard-$r.h5" "$v/partner/shard-$r.json"
  done
}

# newest_local LOCAL: the newest level-2 version directory under LOCAL/<run id>/.
newest_local() {
  local versions=("$1"/*/v*)
  printf '%s\n' "${versions[-1]}"
}

# flip_middle_byte FILE: one bit in the middle of FILE, inside the rows of
# w, which fill most of a shard (HDF5's own metadata sits at the start and
# the end).
flip_middle_byte() {
  perl -e 'open(my $f, "+<", $ARGV[0]) or die; my $n = int((-s $f) / 2); seek($f, $n, 0); read($f, my $b, 1);
           seek($f, $n, 0); print $f chr(ord($b) ^ 1); close $f' "$1"
}

scratch() { mktemp -d "${BATON_TEST_RESULTS}/ckpt-cli.XXXXXX"; }

# reseal MANIFEST: an edited format-4 manifest made whole again (its last
# line, "manifest_xxh3", the xxh3 of every byte before that key, recomputed
# through libxxhash), as a hostile writer could: the checks behind the
# checksum are then under test.
reseal() {
  /usr/bin/python3 - "$1" <<'PY'
import ctypes, sys
x = ctypes.CDLL("libxxhash.so.0")
x.XXH3_64bits.restype = ctypes.c_uint64
x.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
p = sys.argv[1]
t = open(p, "rb").read()
key = t.rindex(b'"manifest_xxh3": "')
open(p, "wb").write(t[:key] + b'"manifest_xxh3": "%016x"\n}\n' % x.XXH3_64bits(t[:key], key))
PY
}

# json_field FIELD: FIELD of every object of the JSON list on stdin, one per line.
json_field() { perl -MJSON::PP -e 'print "$_->{'"$1"'}\n" for @{ decode_json(join "", <STDIN>) }'; }

# The first of its arguments (a glob's first match, in the shell's sorted order).
first_of() { printf '%s\n' "$1"; }
# The newest version's first shard.
newest_shard() {
  local versions=("$1"/v*)
  first_of "${versions[-1]}"/*.h5
}

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

# BATON_CKPT_TEST_RANKS_PER_NODE, a test seam read by libbaton, is never
# taken silently: rank 0 warns when it is set, and names a bad value.
test_the_ranks_per_node_test_setting_is_warned_about() {
  local d err
  d=$(scratch)
  err=$("$REPO/tests/lib/mpirun-ranks" 3 -x BATON_CKPT_TEST_RANKS_PER_NODE=1 "$WORKER" --dir "$d/ckpt" --saves 1 \
    --local-dir "$d/local" 2>&1 >/dev/null)
  expect_eq "$(grep -c 'BATON_CKPT_TEST_RANKS_PER_NODE=1 (a test setting)' <<<"$err")" 1 "warnings (rank 0 once)"
  err=$("$REPO/tests/lib/mpirun-ranks" 3 -x BATON_CKPT_TEST_RANKS_PER_NODE=x1 "$WORKER" --dir "$d/ckpt2" --saves 1 \
    --local-dir "$d/local" 2>&1 >/dev/null)
  grep -q 'BATON_CKPT_TEST_RANKS_PER_NODE="x1" is not a positive integer: ignored' <<<"$err" ||
    fail "no warning about the bad value: $err"
  err=$("$REPO/tests/lib/mpirun-ranks" 3 "$WORKER" --dir "$d/ckpt3" --saves 1 --local-dir "$d/local" 2>&1 >/dev/null)
  ! grep -q 'BATON_CKPT_TEST_RANKS_PER_NODE' <<<"$err" || fail "warned without the setting: $err"
}

# A version directory that cannot be read (mode 000, seen by another user
# than its owner: root reads everything, so as root the commands run as
# nobody) is "unreadable" in ls, not "incomplete", and verify names it and
# exits 1 instead of passing over it.
test_an_unreadable_version_is_named_and_fails_verify() {
  local d out rc
  local -a as=()
  d=$(scratch)
  saves "$d" 2
  chmod -R a+rX "$d"
  chmod 000 "$d/v00000002-s2"
  [ "$(id -u)" = 0 ] && as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  if ! "${as[@]}" test -r "$d/v00000001-s1/manifest.json" || ! "${as[@]}" test -x "$BATON"; then
    echo "SKIP: $d or $BATON is not reachable as nobody (a parent directory closed to others)"
    exit 77
  fi
  out=$("${as[@]}" "$BATON" ckpt ls "$d" --json)
  expect_eq "$(json_field status <<<"$out" | tr '\n' ' ')" "complete unreadable " "statuses"
  rc=0; out=$("${as[@]}" "$BATON" ckpt verify "$d" --no-progress 2>&1) || rc=$?
  expect_eq "$rc" 1 "exit status of verify with an unreadable version"
  grep -q "^FAILED  shared      $d/v00000002-s2  step 2" <<<"$out" || fail "the unreadable version is not named: $out"
  grep -q "unreadable: .*Permission denied" <<<"$out" || fail "verify does not say why: $out"
  grep -q "^ok      shared      $d/v00000001-s1" <<<"$out" || fail "the readable version is not verified: $out"
  chmod 700 "$d/v00000002-s2"
}

# inspect --step N of a step that is gone names the steps that exist.
test_inspect_of_a_step_that_is_gone_lists_the_steps_there() {
  local d out rc
  d=$(scratch)
  saves "$d" 3
  rm -r "$d/v00000002-s2"
  rc=0; out=$("$BATON" ckpt inspect "$d" --step 2 2>&1) || rc=$?
  expect_eq "$rc" 1 "exit status of inspect --step 2"
  grep -q "no committed version of step 2 in $d; the committed steps there, newest first: 3, 1$" <<<"$out" ||
    fail "inspect --step 2 does not list the steps there: $out"
  rc=0; out=$("$BATON" ckpt inspect "$d/empty" --step 2 2>&1) || rc=$?
  expect_eq "$rc" 1 "exit status of inspect --step 2 of a directory without versions"
}

test_verify_passes_then_detects_a_flipped_bit_and_names_the_file() {
  local d shard out rc
  d=$(scratch)
  saves "$d" 1 --group-size 1
  "$BATON" ckpt verify "$d" --no-progress | grep -q '^ok ' || fail "verify of a good version did not say ok"
  shard=$(newest_shard "$d")
  flip_middle_byte "$shard"
  rc=0; out=$("$BATON" ckpt verify "$d" --no-progress) || rc=$?
  expect_eq "$rc" 1 "verify exit status after a flipped bit"
  echo "$out" | grep -q "FAILED" || fail "no FAILED line: $out"
  echo "$out" | grep -q "$(basename "$shard")" || fail "the damaged file is not named: $out"
}

# Issue 32, item 11: a manifest changed after it was written (one array's
# replicated flag, the step) fails its own checksum, and a version whose
# files are another step's (copied in, or an edited step resealed) fails
# the match of its step with its directory: verify says FAILED for each,
# exit 1, naming why.
test_verify_reports_a_changed_manifest_and_a_version_of_another_step() {
  local d m rc out
  d=$(scratch)
  saves "$d" 1
  m=$(first_of "$d"/v*/manifest.json)
  cp "$m" "$d/good.json"
  for edit in 's/"replicated": true/"replicated": false/' 's/"step": 1,/"step": 2,/'; do
    cp "$d/good.json" "$m"
    perl -0pi -e "$edit" "$m"
    rc=0; out=$("$BATON" ckpt verify "$d" --no-progress 2>&1) || rc=$?
    echo "$out"
    expect_eq "$rc" 1 "verify exit status after $edit"
    echo "$out" | grep -q "manifest_xxh3" || fail "verify does not name the manifest's checksum after $edit: $out"
  done
  perl -0pi -e 's/"step": 1,/"step": 2,/' "$m"
  reseal "$m"
  rc=0; out=$("$BATON" ckpt verify "$d" --no-progress 2>&1) || rc=$?
  echo "$out"
  expect_eq "$rc" 1 "verify exit status after a resealed step edit"
  echo "$out" | grep -q "manifest step 2, but its version v00000001-s1 is step 1" ||
    fail "verify does not name the step's mismatch: $out"
  cp "$d/good.json" "$m"
  cp -r "$(dirname "$m")" "$d/v00000002-s7"
  rc=0; out=$("$BATON" ckpt verify "$d" --no-progress 2>&1) || rc=$?
  echo "$out"
  expect_eq "$rc" 1 "verify exit status with a version copied under step 7"
  echo "$out" | grep -q "manifest step 1, but its version v00000002-s7 is step 7" ||
    fail "verify does not name the copied version: $out"
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
  local d out
  d=$(scratch)
  saves "$d" 5
  mkdir -m 700 "$d/v00000002-s99"  # older than the newest complete: a crashed save
  "$BATON" ckpt gc "$d" --keep 2 --dry-run >/dev/null
  # The Checkpointer's own retention (keep 3) already ran after each save.
  expect_eq "$(find "$d" -mindepth 1 -maxdepth 1 -name 'v*' | wc -l)" 4 "versions after --dry-run"
  "$BATON" ckpt gc "$d" --keep 2
  expect_eq "$("$BATON" ckpt ls "$d" --json | json_field step | tr '\n' ' ')" "4 5 " "steps kept"
  # What retention renamed away (.removing-<version>) and a dead process did not finish removing: never a
  # version, nor another program's entry; gc removes it.
  expect_eq "$(find "$d" -mindepth 1 -maxdepth 1 -name '.removing-*' | wc -l)" 0 "set-aside versions left by the saves"
  mkdir -m 700 "$d/.removing-v00000001-s1"
  : >"$d/.removing-v00000001-s1/manifest.json"
  expect_eq "$("$BATON" ckpt ls "$d" --json | json_field step | tr '\n' ' ')" "4 5 " "steps listed beside a set-aside version"
  out=$("$BATON" ckpt gc "$d" --keep 2 --dry-run)
  grep -q "would remove $d/.removing-v00000001-s1 " <<<"$out" || fail "gc --dry-run does not name the set-aside version: $out"
  [ -d "$d/.removing-v00000001-s1" ] || fail "gc --dry-run removed the set-aside version"
  out=$("$BATON" ckpt gc "$d" --keep 2)
  grep -q "removed $d/.removing-v00000001-s1 " <<<"$out" || fail "gc does not name the set-aside version: $out"
  [ ! -e "$d/.removing-v00000001-s1" ] || fail "gc left the set-aside version"
}

test_a_hostile_manifest_is_reported_not_crashed_on() {
  local d m rc out
  d=$(scratch)
  saves "$d" 1
  m=$(first_of "$d"/v*/manifest.json)
  printf '{"format": 1, "step": "not a number"' >"$m"
  "$BATON" ckpt ls "$d" --json | grep -q '"error"' || fail "ls does not report the broken manifest"
  rc=0; out=$("$BATON" ckpt verify "$d" --no-progress 2>&1) || rc=$?
  expect_eq "$rc" 1 "verify exit status on a malformed manifest"
  echo "$out" | grep -q 'manifest.json' || fail "the manifest is not named: $out"
}

test_bad_options_are_named() {
  local d rc out
  d=$(scratch)
  for args in "gc $d --keep 0" "gc $d --level nodelocal" "gc $d --level all" "verify $d --level sharde" \
    "ls $d --step -3" "frobnicate" "inspect $d --nope"; do
    rc=0
    # shellcheck disable=SC2086  # $args is several words on purpose
    out=$("$BATON" ckpt $args 2>&1) || rc=$?
    expect_eq "$rc" 2 "exit status of 'baton ckpt $args'"
    [ -n "$out" ] || fail "no message for 'baton ckpt $args'"
  done
  # A bad level is named, with the levels the subcommand takes.
  out=$("$BATON" ckpt gc "$d" --level nodelocal 2>&1) || true
  grep -q "invalid value 'nodelocal' (expected shared, node-local)" <<<"$out" || fail "gc: the bad level is not named: $out"
  out=$("$BATON" ckpt verify "$d" --level sharde 2>&1) || true
  grep -q "invalid value 'sharde' (expected shared, node-local, all)" <<<"$out" ||
    fail "verify: the bad level is not named: $out"
  # Level 2 with no node-local directory to look in.
  for args in "verify $d --level node-local" "gc $d --level node-local"; do
    rc=0
    # shellcheck disable=SC2086  # $args is several words on purpose
    out=$(env -u BATON_LOCAL_DIR "$BATON" ckpt $args 2>&1) || rc=$?
    expect_eq "$rc" 2 "exit status of 'baton ckpt $args' without a local directory"
    grep -q 'BATON_LOCAL_DIR' <<<"$out" || fail "'baton ckpt $args': the message does not say how to name one: $out"
  done
  rc=0; out=$(env -u BATON_CKPT_DIR "$BATON" ckpt ls 2>&1) || rc=$?
  expect_eq "$rc" 2 "exit status without a directory"
  echo "$out" | grep -q BATON_CKPT_DIR || fail "the message does not say how to name a directory: $out"
  rc=0; out=$("$BATON" ckpt inspect "$d/does-not-exist" 2>&1) || rc=$?
  expect_eq "$rc" 1 "exit status for a missing directory"
  echo "$out" | grep -q "does-not-exist" || fail "the missing directory is not named: $out"
}

# Ranks against cores (docs/benchmarks.md, "Ranks and cores"): 3 ranks on
# this host are oversubscribed when it has fewer than 3 online CPUs; the
# JSON says so on every line and stderr warns, else neither.
check_oversubscription() {  # check_oversubscription JSON_LINES STDERR
  local cores want
  cores=$(getconf _NPROCESSORS_ONLN)
  want=false
  [ "$cores" -lt 3 ] && want=true
  echo "$1" | perl -MJSON::PP -e '
    my ($cores, $want) = @ARGV;
    while (my $line = <STDIN>) {
      my $j = decode_json($line);
      $j->{ranks_per_node} == 3 or die "ranks_per_node $j->{ranks_per_node}: $line";
      $j->{node_cores} == $cores or die "node_cores $j->{node_cores}, getconf says $cores";
      ($j->{oversubscribed} ? "true" : "false") eq $want or die "oversubscribed: $line";
    }' "$cores" "$want" || fail "the JSON does not say ranks against cores"
  if [ "$want" = true ]; then
    grep -q "warning: 3 ranks on .* share its $cores core(s)" <<<"$2" || fail "no warning on stderr: $2"
  else
    ! grep -q "warning: .* ranks on" <<<"$2" || fail "a warning at ranks <= cores: $2"
  fi
}

test_bench_ckpt_json_has_the_documented_fields() {
  local d out
  d=$(scratch)
  out=$("$REPO/tests/lib/mpirun-ranks" 3 "$BATON" bench ckpt --dir "$d" --bytes 6M --arrays 2 --reps 2 --json \
    2>"$d.err")
  check_oversubscription "$out" "$(cat "$d.err")"
  echo "$out" | perl -MJSON::PP -e '
    my %seen;
    while (my $line = <STDIN>) {
      my $j = decode_json($line);
      for my $k (qw(op bytes ranks group_size seconds GBps raw_GBps ratio)) { exists $j->{$k} or die "no $k" }
      $j->{ranks} == 3 or die "ranks $j->{ranks}";
      $j->{seconds} > 0 && $j->{GBps} > 0 && $j->{raw_GBps} > 0 or die "not positive: $line";
      abs($j->{ratio} - $j->{GBps} / $j->{raw_GBps}) < 1e-9 * $j->{ratio} or die "ratio";
      my @want = $j->{op} eq "save"
          ? qw(hash agree create write close verify sync meta_hash manifest retention)
          : qw(list manifest open read verify agree gather);
      for my $p (@want) { defined $j->{phases}{$p} && $j->{phases}{$p} >= 0 or die "no phase $p: $line" }
      $j->{phases}{write} > 0 or die "no write time: $line" if $j->{op} eq "save";
      $j->{phases}{read} > 0 or die "no read time: $line" if $j->{op} eq "restore";
      # Each repetition, not only the medians: how often a goal is missed.
      for my $k (qw(rep_seconds raw_rep_seconds)) {
        ref $j->{$k} eq "ARRAY" && @{$j->{$k}} == 2 or die "no 2 $k: $line";
        $_ > 0 or die "$k not positive: $line" for @{$j->{$k}};
      }
      $seen{$j->{op}}++;
    }
    $seen{save} == 1 && $seen{restore} == 1 or die "expected one save and one restore line"'
  expect_eq "$(ls -A "$d")" "" "what bench ckpt left without --no-cleanup"
}

test_bench_ckpt_async_json_has_the_documented_fields() {
  local d out
  d=$(scratch)
  out=$("$REPO/tests/lib/mpirun-ranks" 3 "$BATON" bench ckpt --async --dir "$d" --bytes 6M --arrays 2 --reps 2 \
    --steps 4 --every 2 --json 2>"$d.err")
  check_oversubscription "$out" "$(cat "$d.err")"
  echo "$out" | perl -MJSON::PP -e '
    my %seen;
    # Where a SaveAsync spends its time (ckpt/README.md): the phases of the
    # call, then those of the writer of the save it completed (its thread).
    my @phases = qw(check wait_write commit_agree index manifest retention stage agree create start
                    writer_write writer_sync writer_meta_hash writer_index writer_retention);
    while (my $line = <STDIN>) {
      my $j = decode_json($line);
      $j->{ranks} == 3 or die "ranks $j->{ranks}";
      if ($j->{op} eq "save_async") {
        for my $k (qw(bytes blocking_seconds memcpy_seconds ratio first_blocking_seconds write_seconds)) {
          exists $j->{$k} or die "no $k" }
        $j->{blocking_seconds} > 0 && $j->{memcpy_seconds} > 0 or die "not positive: $line";
        for my $p (@phases) { defined $j->{phases}{$p} && $j->{phases}{$p} >= 0 or die "no phase $p: $line" }
        $j->{phases}{stage} > 0 or die "no staging time: $line";
      } elsif ($j->{op} eq "save_async_loop") {
        for my $k (qw(steps_per_s steps_per_s_no_ckpt ratio seconds_in_save_async blocking_per_save_seconds
                      blocking_per_save_over_memcpy saves_per_loop)) { exists $j->{$k} or die "no $k" }
        $j->{steps_per_s} > 0 && $j->{steps_per_s_no_ckpt} > 0 or die "not positive: $line";
        for my $p (@phases) { defined $j->{phases_per_save}{$p} or die "no phase $p: $line" }
        # In the loop each call commits the save before it, whose writer wrote and synced.
        $j->{phases_per_save}{writer_write} > 0 && $j->{phases_per_save}{writer_sync} > 0
          or die "the loop shows no writer time: $line";
        # The disk kept busy as the loop keeps it (issue 48 item 6): its sustained write, and the loop
        # ratio it allows.
        $j->{sustained_raw_write_seconds} > 0 && $j->{compute_per_save_seconds} > 0 or die "no sustained disk: $line";
        $j->{ratio_bound_at_sustained_disk} > 0 && $j->{ratio_bound_at_sustained_disk} < 1
          or die "disk bound out of (0, 1): $line";
      } else { die "unexpected op $j->{op}" }
      $seen{$j->{op}}++;
    }
    $seen{save_async} == 1 && $seen{save_async_loop} == 1 or die "expected one line of each"'
  expect_eq "$(ls -A "$d")" "" "what bench ckpt --async left"
}

# A manifest's strings are untrusted: an escape code or a newline in its
# "time" must not reach the terminal raw, nor forge an ls row.
test_untrusted_text_is_printed_escaped() {
  local d m out
  d=$(scratch)
  saves "$d" 1
  m=$(first_of "$d"/v*/manifest.json)
  perl -0pi -e 's/"time": "[^"]*"/"time": "\\u001b[2J\\nfake      1  complete"/' "$m"
  reseal "$m"
  out=$("$BATON" ckpt ls "$d")
  echo "$out"
  ! grep -q $'\x1b' <<<"$out" || fail "ls printed a raw escape code"
  ! grep -q '^fake' <<<"$out" || fail "a newline in the manifest forged an ls row"
  grep -q '\\x1b\[2J\\x0afake' <<<"$out" || fail "the time is not shown escaped"
  out=$("$BATON" ckpt inspect "$d")
  ! grep -q $'\x1b' <<<"$out" || fail "inspect printed a raw escape code"
  "$BATON" ckpt ls "$d" --json | perl -MJSON::PP -e 'decode_json(join "", <STDIN>)' || fail "ls --json is not JSON"
}

# gc of a directory that holds no checkpoint (`gc /`, `gc /etc` once
# succeeded silently) is refused, and nothing in it is touched.
test_gc_refuses_a_directory_without_checkpoints() {
  local d rc out
  d=$(scratch)
  touch "$d/passwd"
  rc=0; out=$("$BATON" ckpt gc "$d" --keep 1 2>&1) || rc=$?
  echo "$out"
  expect_eq "$rc" 1 "exit status of gc on a directory without checkpoints"
  grep -q "holds no checkpoint" <<<"$out" || fail "the refusal does not say why"
  expect_eq "$(ls -A "$d")" "passwd" "what gc left"
}

# While a writer lives, gc keeps out (its lock); a version whose
# restore-failures is a FIFO neither hangs nor fails ls and gc.
test_gc_keeps_out_of_a_live_writer_and_past_an_unreadable_version() {
  local d w rc out
  d=$(scratch)
  saves "$d" 3
  mkfifo "$(first_of "$d"/v*)/restore-failures"
  out=$(timeout 20 "$BATON" ckpt ls "$d") || fail "ls failed or hung on a FIFO: $out"
  echo "$out"
  grep -q 'not a regular file (a FIFO)' <<<"$out" || fail "ls does not show the problem"
  "$REPO/tests/lib/mpirun-ranks" 3 "$WORKER" --dir "$d" --saves 1000 --sleep-ms 200 >"$d.worker" 2>&1 &
  w=$!
  for _ in $(seq 600); do grep -q 'saved step=' "$d.worker" && break; sleep 0.1; done
  grep -q 'saved step=' "$d.worker" || { kill "$w"; fail "the writer never saved"; }
  rc=0; out=$(timeout 20 "$BATON" ckpt gc "$d" --keep 1 2>&1) || rc=$?
  kill "$w"; wait "$w" || true
  echo "$out"
  expect_eq "$rc" 1 "exit status of gc beside a live writer"
  grep -q "a live writer uses" <<<"$out" || fail "the refusal does not name the writer"
  rc=0; out=$(timeout 20 "$BATON" ckpt gc "$d" --keep 1 2>&1) || rc=$?
  echo "$out"
  expect_eq "$rc" 0 "exit status of gc once the writer is gone"
}

# A directory given as a symlink is the directory it names, with or
# without a trailing slash (it said "Not a directory" without one).
test_a_symlinked_directory_is_the_directory_it_names() {
  local d
  d=$(scratch)
  saves "$d/real" 1
  ln -s "$d/real" "$d/link"
  expect_eq "$("$BATON" ckpt ls "$d/link" --json | json_field path)" "$("$BATON" ckpt ls "$d/real" --json | json_field path)" \
    "ls of the link and of the directory"
  expect_eq "$("$BATON" ckpt ls "$d/link/" --json | json_field step)" "1" "ls of the link with a slash"
  "$BATON" ckpt verify "$d/link" --no-progress >/dev/null || fail "verify through the link"
}

# A manifest larger than its version's files allow (a sparse 998 MB file
# beside small shards: issue 32 item 11, where it peaked at 3.6 GB under the
# 1 GiB limit) is refused before it is read: an error naming its size and
# the limit, little memory.
test_a_huge_manifest_is_refused_before_it_is_read() {
  local d m rc out kb
  d=$(scratch)
  saves "$d" 1
  m=$(first_of "$d"/v*/manifest.json)
  truncate -s 998M "$m"
  rc=0; out=$(/usr/bin/time -f '%M' "$BATON" ckpt inspect "$d" 2>&1) || rc=$?
  echo "$out"
  expect_eq "$rc" 1 "exit status of inspect"
  grep -q "manifest.json: 1046478848 bytes, more than the limit of [0-9]* a manifest of this version may hold" \
    <<<"$out" || fail "the size and the limit are not named"
  kb=$(tail -n 1 <<<"$out")
  [ "$kb" -lt 100000 ] || fail "inspect took $kb KiB for a manifest it refused"
}

# Level 2 as one node holds it: its own shard and its partner's copy are
# verified, the third node's shard is reported as held elsewhere (not a
# failure); the default level with a local directory is both levels.
test_verify_checks_the_node_local_copies_this_node_holds() {
  local d l v out rc
  d=$(scratch)
  l=$d/local
  level2_saves "$d/ckpt" "$l" 2
  v=$(newest_local "$l")
  out=$("$BATON" ckpt verify "$d/ckpt" --local-dir "$l" --no-progress --step 2)
  echo "$out"
  grep -qE "^ok +shared +$d/ckpt/v[0-9]+-s2 +step 2 " <<<"$out" || fail "no ok line of the shared level: $out"
  grep -qE "^ok +node-local +$v +step 2 +[0-9]+ bytes +\(shards: own 3, partner 3\)$" <<<"$out" ||
    fail "no ok line of level 2 with 3 own and 3 partner copies (one disk for all nodes): $out"
  node_view "$v" 1
  rc=0; out=$(BATON_LOCAL_DIR=$l "$BATON" ckpt verify "$d/ckpt" --level node-local --no-progress --step 2) || rc=$?
  echo "$out"
  expect_eq "$rc" 0 "exit status of verify of node 1's copies"
  grep -qE "^ok +node-local +$v +step 2 .*\(shards: own 1, partner 1\)$" <<<"$out" ||
    fail "node 1 holds its own shard and node 0's: $out"
  grep -q "not on this node: 1 of 3 shards (ranks 2), held by other nodes" <<<"$out" ||
    fail "the shard of node 2 is not reported as held elsewhere: $out"
  ! grep -qE '^ok +shared' <<<"$out" || fail "--level node-local verified the shared level: $out"
}

# A flipped bit in a partner copy fails the version, naming partner/'s file.
test_verify_names_a_damaged_partner_copy_in_level_2() {
  local d l v out rc
  d=$(scratch)
  l=$d/local
  level2_saves "$d/ckpt" "$l" 1
  v=$(newest_local "$l")
  node_view "$v" 1
  flip_middle_byte "$v/partner/shard-0.h5"
  rc=0; out=$("$BATON" ckpt verify "$d/ckpt" --level node-local --local-dir "$l" --no-progress) || rc=$?
  echo "$out"
  expect_eq "$rc" 1 "exit status of verify after a flipped bit in a partner copy"
  grep -qE "^FAILED +node-local +$v +step 1" <<<"$out" || fail "no FAILED line of level 2: $out"
  grep -qE "^  partner/shard-0\.h5: dataset w rows .*xxh3 [0-9a-f]+ != manifest" <<<"$out" ||
    fail "the damaged partner copy is not named: $out"
  ! grep -qE '^  shard-1\.h5' <<<"$out" || fail "the intact own copy is reported: $out"
  # The shared level is another copy: not touched, still ok.
  "$BATON" ckpt verify "$d/ckpt" --level shared --local-dir "$l" --no-progress | grep -qE '^ok +shared' ||
    fail "the shared level fails with a damaged level-2 copy"
}

# partner/ as a symlink to a copy outside the version (issue 32 item 11) is
# not verified through: a failure naming it.
test_verify_fails_a_partner_directory_that_is_a_symlink() {
  local d l v out rc
  d=$(scratch)
  l=$d/local
  level2_saves "$d/ckpt" "$l" 1
  v=$(newest_local "$l")
  mv "$v/partner" "$d/outside"
  ln -s "$d/outside" "$v/partner"
  rc=0; out=$("$BATON" ckpt verify "$d/ckpt" --level node-local --local-dir "$l" --no-progress) || rc=$?
  echo "$out"
  expect_eq "$rc" 1 "exit status of verify with partner/ a symlink"
  grep -qE "^FAILED +node-local +$v .*\(shards: own 3, partner 0\)$" <<<"$out" || fail "no FAILED line: $out"
  grep -qF "$v/partner is a symlink; partner copies must be files inside the version" <<<"$out" ||
    fail "the symlink is not named: $out"
}

# An own shard whose file is gone but whose index is not is held in part:
# a failure naming the file. With every own file gone, the node has lost
# its copies (it wrote them before it committed the version).
test_verify_fails_a_missing_own_shard_in_level_2() {
  local d l v out rc
  d=$(scratch)
  l=$d/local
  level2_saves "$d/ckpt" "$l" 1
  v=$(newest_local "$l")
  node_view "$v" 2
  rm "$v/shard-2.h5"
  rc=0; out=$("$BATON" ckpt verify "$d/ckpt" --level node-local --local-dir "$l" --no-progress) || rc=$?
  echo "$out"
  expect_eq "$rc" 1 "exit status of verify with an own shard missing"
  grep -qE "^FAILED +node-local +$v .*\(shards: own 1, partner 1\)$" <<<"$out" || fail "no FAILED line: $out"
  # Named once (issue 32, item 11: it was "shard-2.h5: /.../shard-2.h5: missing").
  grep -qE "^  shard-2\.h5: missing, yet the manifest lists it" <<<"$out" ||
    fail "the missing shard is not named once: $out"
  rm "$v/shard-2.json"
  rc=0; out=$("$BATON" ckpt verify "$d/ckpt" --level node-local --local-dir "$l" --no-progress) || rc=$?
  echo "$out"
  expect_eq "$rc" 1 "exit status of verify with no own shard left"
  grep -q "no own copy of any shard" <<<"$out" || fail "a node without its own copies is not reported: $out"
}

# gc --level node-local keeps the Checkpointer's level-2 count (2) by
# default, in this node's directory of the run only; the shared level keeps
# its own (3). Older versions are made by copying the oldest one under
# lower sequence numbers (the Checkpointer's retention already ran).
test_gc_prunes_each_level_with_its_own_default() {
  local d l root v shared_before out rc fd
  d=$(scratch)
  l=$d/local
  level2_saves "$d/ckpt" "$l" 5
  v=$(newest_local "$l")
  root=$(dirname "$v")
  expect_eq "$(cd "$root" && echo v*)" "v00000004-s4 v00000005-s5" "level 2 after 5 saves (the Checkpointer keeps 2)"
  cp -a "$root/v00000004-s4" "$root/v00000001-s1"
  cp -a "$root/v00000004-s4" "$root/v00000002-s2"
  shared_before=$(cd "$d/ckpt" && echo v*)
  expect_eq "$shared_before" "v00000003-s3 v00000004-s4 v00000005-s5" "shared after 5 saves (the Checkpointer keeps 3)"
  # While the run's writer lock is held (a live Checkpointer), node-local gc keeps out too.
  exec {fd}>>"$d/ckpt/writer.lock"
  flock -n "$fd" || fail "could not take the writer lock for the test"
  rc=0; out=$("$BATON" ckpt gc "$d/ckpt" --level node-local --local-dir "$l" 2>&1) || rc=$?
  exec {fd}>&-
  echo "$out"
  expect_eq "$rc" 1 "exit status of node-local gc beside a live writer"
  grep -q "a live writer uses $d/ckpt" <<<"$out" || fail "the refusal does not name the writer's directory: $out"
  out=$("$BATON" ckpt gc "$d/ckpt" --level node-local --local-dir "$l" --dry-run)
  expect_eq "$(cd "$root" && echo v*)" "v00000001-s1 v00000002-s2 v00000004-s4 v00000005-s5" "level 2 after --dry-run"
  grep -q "would remove $root/v00000001-s1  (node-local, step 1" <<<"$out" || fail "dry run: $out"
  out=$(BATON_LOCAL_DIR=$l "$BATON" ckpt gc "$d/ckpt" --level node-local)
  echo "$out"
  expect_eq "$(cd "$root" && echo v*)" "v00000004-s4 v00000005-s5" "level 2 after gc (default keep 2)"
  expect_eq "$(grep -c '^removed ' <<<"$out")" 2 "versions removed"
  expect_eq "$(cd "$d/ckpt" && echo v*)" "$shared_before" "shared level after node-local gc"
  # The shared level: keeps 3 by default.
  cp -a "$d/ckpt/v00000003-s3" "$d/ckpt/v00000001-s1"
  cp -a "$d/ckpt/v00000003-s3" "$d/ckpt/v00000002-s2"
  out=$("$BATON" ckpt gc "$d/ckpt" --local-dir "$l")
  echo "$out"
  expect_eq "$(cd "$d/ckpt" && echo v*)" "$shared_before" "shared level after gc (default keep 3)"
  expect_eq "$(cd "$root" && echo v*)" "v00000004-s4 v00000005-s5" "level 2 after shared gc"
  # --keep still overrides, per level.
  "$BATON" ckpt gc "$d/ckpt" --level node-local --local-dir "$l" --keep 1 >/dev/null
  expect_eq "$(cd "$root" && echo v*)" "v00000005-s5" "level 2 after gc --keep 1"
}

# Node-local gc of a local directory that holds nothing of the run is
# refused, as shared gc refuses a directory without checkpoints.
test_gc_node_local_refuses_a_directory_without_the_run() {
  local d rc out
  d=$(scratch)
  saves "$d/ckpt" 1
  mkdir "$d/local"
  touch "$d/local/keepme"
  rc=0; out=$("$BATON" ckpt gc "$d/ckpt" --level node-local --local-dir "$d/local" 2>&1) || rc=$?
  echo "$out"
  expect_eq "$rc" 1 "exit status of node-local gc without the run's directory"
  grep -q "holds no node-local checkpoint of $d/ckpt: refusing to clean it" <<<"$out" || fail "the refusal does not say why: $out"
  expect_eq "$(ls -A "$d/local")" "keepme" "what gc left"
}

# ls names the node-local copies a restore passes over: those of versions
# removed from the shared directory (`gc`, rm -r: a rollback), which the
# shared directory records (docs/recovery.md).
test_ls_names_node_local_copies_of_versions_removed_from_the_shared_directory() {
  local d l out
  d=$(scratch)
  l=$d/local
  level2_saves "$d/ckpt" "$l" 3
  out=$("$BATON" ckpt ls "$d/ckpt" --json --local-dir "$l")
  expect_eq "$(json_field node_local_not_restored <<<"$out" | tr -s '\n' ' ')" " " "no copy passed over before the removal"
  rm -r "$d/ckpt/v00000003-s3"
  out=$("$BATON" ckpt ls "$d/ckpt" --json --local-dir "$l")
  expect_eq "$(json_field step <<<"$out" | tr '\n' ' ')" "1 2 3 " "versions listed"
  expect_eq "$(json_field node_local_not_restored <<<"$out" | sed -n 3p)" \
    "level 3 committed it and $d/ckpt no longer holds it" "why step 3's copy is passed over"
  expect_eq "$(json_field node_local_not_restored <<<"$out" | sed -n 2p)" "" "step 2's copy is still restored"
  out=$("$BATON" ckpt ls "$d/ckpt" --local-dir "$l")
  grep -q "node-local copy not restored: level 3 committed it" <<<"$out" || fail "the table does not say so: $out"
}
