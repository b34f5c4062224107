// How many hosts a Slurm host list can name, counted from its text before
// libslurm is handed it. libslurm expands every bracket group of one entry
// against every other ("a[0-2][0-1]:b[0-1][0-1]" names 3*2*2*2 = 24 hosts)
// and builds them all inside slurm_hostlist_create, before anyone can ask
// slurm_hostlist_count: four groups of 301 ("a[0-300][0-300]:b[0-300][0-300]",
// 8.2e9 hosts) held it for minutes (found by tests/fuzz/fuzz_layout). A list
// that could name more hosts than the caller can hold is refused here,
// naming it, in time linear in its length.
#pragma once

#include <cstddef>
#include <string_view>

#include "baton/status.h"

namespace baton::launch {

// OK when `hostlist` names at most `max_hosts` hosts by this count (which
// is never below libslurm's own). The grammar is Slurm's: entries split by
// commas outside brackets; within an entry any number of bracket groups,
// each a comma-separated list of numbers "7" or ranges "01-16". Anything
// else between brackets, a bracket inside another, an unclosed or unopened
// one, an empty group or a number past 2^64 is refused as malformed; so is
// a range that runs backwards ("n[3-1]").
Status CheckHostlistBound(std::string_view hostlist, size_t max_hosts);

}  // namespace baton::launch
