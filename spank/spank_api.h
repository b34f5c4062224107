// Slurm's spank.h declares the plugin entry points without C linkage
// guards; every file of the plugin includes it through here.
#pragma once

extern "C" {
#include <slurm/spank.h>
}
