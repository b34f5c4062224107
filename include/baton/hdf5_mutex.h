// The process's one HDF5 lock.
//
// HDF5 1.10 as Debian 12 ships it is built without its thread-safe option:
// two threads inside the library at once corrupt its global state (the ID
// tables, the error stack, the metadata cache). baton holds this mutex
// around every stretch of its own HDF5 calls: Checkpointer::Save and
// Restore for their duration, and the background writer of
// Checkpointer::SaveAsync while it creates, writes and closes its shard
// file. A program that calls HDF5 itself (its own files, h5py embedded in
// the same process) while a Checkpointer exists must hold it around those
// calls too:
//
//   {
//     std::lock_guard<std::mutex> lock(baton::Hdf5Mutex());
//     H5Fcreate(...); ...; H5Fclose(...);
//   }
//
// Never hold it across a Checkpointer call: Save and Restore take it, and
// Wait (like every call that completes a save in flight) waits for the
// writer, which waits for it: a self-deadlock. Keep each hold short: an
// asynchronous save's writer waits for it.
#pragma once

#include <mutex>

namespace baton {

std::mutex& Hdf5Mutex();

}  // namespace baton
