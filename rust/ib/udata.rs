// SPDX-License-Identifier: GPL-2.0

//! `struct ib_udata`: the driver-private part of a uverbs command, in and
//! out, following the ABI's evolution rules (rust/abi/mod.rs).

use crate::ffi::bindings;
use core::mem::size_of;
use kernel::{
    prelude::*,
    types::{AsBytes, FromBytes},
    uaccess::UserSlice,
};

/// The user buffers of one verbs call. Kernel ULPs call verbs with no
/// udata; then requests read as all-zero and responses go nowhere.
pub(crate) struct UData {
    inbuf: usize,
    inlen: usize,
    outbuf: usize,
    outlen: usize,
    ucontext: Option<core::ptr::NonNull<bindings::ib_ucontext>>,
}

/// The user context of the process making a verbs call, valid for the
/// call. Objects that share memory with the process (rings) are made
/// mappable through it.
#[derive(Clone, Copy)]
pub(crate) struct UContext<'a>(
    pub(super) core::ptr::NonNull<bindings::ib_ucontext>,
    core::marker::PhantomData<&'a ()>,
);

impl UData {
    /// # Safety
    ///
    /// `ptr` is NULL or a valid `ib_udata` for the duration of the call.
    pub(super) unsafe fn from_raw(ptr: *const bindings::ib_udata) -> Self {
        if ptr.is_null() {
            return Self {
                inbuf: 0,
                inlen: 0,
                outbuf: 0,
                outlen: 0,
                ucontext: None,
            };
        }
        // SAFETY: valid per the caller; plain reads of four fields.
        let u = unsafe { &*ptr };
        // SAFETY: a non-NULL udata is the driver udata of a uverbs call's
        // attribute bundle, whose context is live for the call.
        let ucontext =
            core::ptr::NonNull::new(unsafe { bindings::rxud_udata_ucontext(ptr.cast_mut()) });
        Self {
            inbuf: u.inbuf as usize,
            inlen: u.inlen,
            outbuf: u.outbuf as usize,
            outlen: u.outlen,
            ucontext,
        }
    }

    /// The calling process's user context; `None` for kernel callers.
    pub(crate) fn ucontext(&self) -> Option<UContext<'_>> {
        self.ucontext
            .map(|p| UContext(p, core::marker::PhantomData))
    }

    /// Reads the request `T`. A shorter request (older librxud) reads as
    /// if zero-extended; a longer one (newer librxud) is accepted only if
    /// the part this kernel does not know is zero, else `EOPNOTSUPP`.
    pub(crate) fn read<T: FromBytes + AsBytes + Default>(&self) -> Result<T> {
        let mut value = T::default();
        let n = self.inlen.min(size_of::<T>());
        if n > 0 {
            let mut reader = UserSlice::new(self.inbuf, self.inlen).reader();
            // SAFETY: `T: FromBytes + AsBytes`: every byte pattern is a
            // valid `T` and all its bytes are initialised, so viewing it as
            // bytes and overwriting the first `n` of them is sound.
            let bytes =
                unsafe { core::slice::from_raw_parts_mut((&raw mut value).cast::<u8>(), n) };
            reader.read_slice(bytes)?;
            let mut rest = self.inlen - n;
            let mut chunk = [0u8; 64];
            while rest > 0 {
                let m = rest.min(chunk.len());
                reader.read_slice(&mut chunk[..m])?;
                if chunk[..m].iter().any(|&b| b != 0) {
                    return Err(super::eopnotsupp());
                }
                rest -= m;
            }
        }
        Ok(value)
    }

    /// Writes the response `T`, truncated to what the caller has room for
    /// (an older librxud knows a prefix of it).
    pub(crate) fn write<T: AsBytes>(&self, value: &T) -> Result {
        let n = self.outlen.min(size_of::<T>());
        if n == 0 {
            return Ok(());
        }
        // SAFETY: `T: AsBytes`: all `size_of::<T>()` bytes are initialised.
        let bytes =
            unsafe { core::slice::from_raw_parts(core::ptr::from_ref(value).cast::<u8>(), n) };
        UserSlice::new(self.outbuf, self.outlen)
            .writer()
            .write_slice(bytes)
    }
}

impl UData {
    /// Writes `value` at the user address `addr` of the calling process:
    /// the response of a command whose uverbs form has no response buffer
    /// (MODIFY_SRQ), at an address its request names. `EINVAL` for a
    /// kernel caller; `EFAULT` if the address is not writable.
    pub(crate) fn write_at<T: AsBytes>(&self, addr: u64, value: &T) -> Result {
        if self.ucontext.is_none() {
            return Err(EINVAL);
        }
        let addr = usize::try_from(addr).map_err(|_| EFAULT)?;
        // SAFETY: `T: AsBytes`: all `size_of::<T>()` bytes are initialised.
        let bytes = unsafe {
            core::slice::from_raw_parts(core::ptr::from_ref(value).cast::<u8>(), size_of::<T>())
        };
        // The copy checks the address range (access_ok) and faults.
        UserSlice::new(addr, size_of::<T>())
            .writer()
            .write_slice(bytes)
    }
}

// SAFETY (all impls below): the ABI structs are `repr(C)`, made only of
// integers, with explicit reserved fields and no implicit padding (their
// sizes are asserted in rust/abi/mod.rs), so every byte pattern is valid
// and every byte is initialised.
macro_rules! abi_bytes {
    ($($t:ty),*) => { $(
        // SAFETY: see above.
        unsafe impl FromBytes for $t {}
        // SAFETY: see above.
        unsafe impl AsBytes for $t {}
    )* };
}
abi_bytes!(
    crate::abi::AllocContextReq,
    crate::abi::AllocContextResp,
    crate::abi::CreateCqReq,
    crate::abi::CreateCqResp,
    crate::abi::ResizeCqReq,
    crate::abi::ResizeCqResp,
    crate::abi::ModifySrqReq,
    crate::abi::ModifySrqResp,
    crate::abi::CreateQpReq,
    crate::abi::CreateQpResp,
    crate::abi::CreateSrqReq,
    crate::abi::CreateSrqResp,
    crate::abi::CreateAhResp
);
