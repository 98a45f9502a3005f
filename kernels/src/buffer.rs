//! Heap buffers aligned for vector loads, which kernels read and write through raw pointers.

use crate::RunError;
use mxc_dialects::program::ALIGN;
use std::alloc::{alloc_zeroed, dealloc, Layout};

/// A zero-initialised, 64-byte aligned byte buffer (never of size zero, so it always has an address).
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
    layout: Layout,
}

impl AlignedBuf {
    /// `len` zero bytes for what `what` names (called only for the error, when the memory is
    /// not there, so a run that gets its memory formats nothing).
    pub fn zeroed(len: usize, what: impl FnOnce() -> String) -> Result<AlignedBuf, RunError> {
        let layout = Layout::from_size_align(len.max(ALIGN), ALIGN).ok();
        // SAFETY: the layout has a non-zero size.
        let ptr = layout.map_or(std::ptr::null_mut(), |layout| unsafe { alloc_zeroed(layout) });
        match (layout, ptr.is_null()) {
            (Some(layout), false) => Ok(AlignedBuf { ptr, len, layout }),
            _ => Err(RunError::Memory {
                what: what(),
                bytes: len,
            }),
        }
    }

    pub fn from_bytes(bytes: &[u8], what: impl FnOnce() -> String) -> Result<AlignedBuf, RunError> {
        let mut b = AlignedBuf::zeroed(bytes.len(), what)?;
        b.as_mut_slice().copy_from_slice(bytes);
        Ok(b)
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for len bytes and uniquely borrowed through &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
}

// SAFETY: an AlignedBuf owns its allocation alone, as a Vec<u8> does: moving it to another
// thread moves that ownership.
unsafe impl Send for AlignedBuf {}
// SAFETY: through &AlignedBuf only its address and length are read; writing through the
// address is the unsafe caller's to order (kernels write only a run's own buffers).
unsafe impl Sync for AlignedBuf {}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: ptr was allocated with this layout and is freed once.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}
