#include "ckpt/hdf5/metadata_cache.h"

#include "ckpt/hdf5/h5_check.h"

namespace baton::ckpt::h5 {

Status BoundWriterMetadataCache(hid_t fapl) {
  H5AC_cache_config_t mdc;
  mdc.version = H5AC__CURR_CACHE_CONFIG_VERSION;
  BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Pget_mdc_config(fapl, &mdc)));
  mdc.set_initial_size = true;
  mdc.initial_size = kWriterMetadataCacheBytes;
  mdc.min_size = kWriterMetadataCacheBytes;
  mdc.max_size = kWriterMetadataCacheBytes;
  mdc.incr_mode = H5C_incr__off;  // the hit rate of a writer is low by design: growing would not help it
  mdc.flash_incr_mode = H5C_flash_incr__off;
  mdc.decr_mode = H5C_decr__off;
  return BATON_H5_CHECK(H5Pset_mdc_config(fapl, &mdc));
}

}  // namespace baton::ckpt::h5
