#include "baton/hdf5_mutex.h"

namespace baton {

// A function-local static: constructed on first use, from any thread
// (C++11 makes that initialisation thread-safe), never destroyed before a
// writer thread that might still use it (it lives until exit).
std::mutex& Hdf5Mutex() {
  static std::mutex* const mu = new std::mutex;
  return *mu;
}

}  // namespace baton
