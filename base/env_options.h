// Options that a program sets in code or a user sets in the environment:
// an option's explicit value wins, else the environment variable, else the
// documented default. A bad value (in either place) is InvalidArgument
// naming the variable or option and the value; it never silently falls
// back. MPI-free (unit-tested without mpirun).
#pragma once

#include <string_view>

#include "baton/status.h"

namespace baton {

// A positive number of seconds (or any positive real: a fraction).
// `option` > 0: taken; 0: `env` if set and non-empty, else `fallback`;
// < 0: InvalidArgument naming `option_name`.
Status PositiveNumberOption(std::string_view option_name, double option, const char* env, double fallback,
                            double* out);

// A positive count (steps, calls): the same rules for an integer.
Status PositiveCountOption(std::string_view option_name, long option, const char* env, long fallback, long* out);

// A signal by name or number: "USR2", "SIGUSR2", "sigusr2", "12".
// Catchable signals only (not KILL or STOP).
Status ParseSignal(std::string_view text, int* sig);

// `option` > 0: taken (must be catchable); 0: `env` (ParseSignal) if set,
// else `fallback`.
Status SignalOption(std::string_view option_name, int option, const char* env, int fallback, int* out);

}  // namespace baton
