//! The calls HIP and the CUDA driver share: memory, copies, modules, launches. Their C
//! signatures are the same in both APIs on a 64-bit machine (a device address is a
//! pointer-sized integer in both), so one table of function pointers, looked up by each
//! vendor's names (or, for HIP in a build with the `hip-sys` feature, filled from the HIP it
//! links), serves both; what differs (making the device current on a thread, turning a status
//! into a message) is said by `hip.rs` and `cuda.rs`, which also open the runtime.

use super::{symbol, DevicePtr, Driver, Handle, Vendor};
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};

pub(crate) type Status = c_int;
type Launch = unsafe extern "C" fn(
    *mut c_void,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    *mut c_void,
    *mut *mut c_void,
    *mut *mut c_void,
) -> Status;

/// Each shared call's name in one vendor's API.
pub(crate) struct Names {
    pub alloc: &'static str,
    pub free: &'static str,
    pub to_device: &'static str,
    pub to_host: &'static str,
    pub on_device: &'static str,
    pub load_module: &'static str,
    pub unload_module: &'static str,
    pub function: &'static str,
    pub launch: &'static str,
    pub synchronize: &'static str,
}

/// The shared calls, by the C signatures both APIs give them.
pub(crate) struct Functions {
    pub alloc: unsafe extern "C" fn(*mut DevicePtr, usize) -> Status,
    pub free: unsafe extern "C" fn(DevicePtr) -> Status,
    pub to_device: unsafe extern "C" fn(DevicePtr, *const c_void, usize) -> Status,
    pub to_host: unsafe extern "C" fn(*mut c_void, DevicePtr, usize) -> Status,
    pub on_device: unsafe extern "C" fn(DevicePtr, DevicePtr, usize) -> Status,
    pub load_module: unsafe extern "C" fn(*mut *mut c_void, *const c_void) -> Status,
    pub unload_module: unsafe extern "C" fn(*mut c_void) -> Status,
    pub function: unsafe extern "C" fn(*mut *mut c_void, *mut c_void, *const c_char) -> Status,
    pub launch: Launch,
    pub synchronize: unsafe extern "C" fn() -> Status,
}

impl Functions {
    /// The shared calls of `lib`, by `names`; they point into it.
    pub fn look_up(lib: &libloading::Library, names: &Names) -> Result<Functions, String> {
        // SAFETY: each type is the C signature both APIs give the function named.
        unsafe {
            Ok(Functions {
                alloc: symbol(lib, names.alloc)?,
                free: symbol(lib, names.free)?,
                to_device: symbol(lib, names.to_device)?,
                to_host: symbol(lib, names.to_host)?,
                on_device: symbol(lib, names.on_device)?,
                load_module: symbol(lib, names.load_module)?,
                unload_module: symbol(lib, names.unload_module)?,
                function: symbol(lib, names.function)?,
                launch: symbol(lib, names.launch)?,
                synchronize: symbol(lib, names.synchronize)?,
            })
        }
    }
}

/// How a thread makes the device current before a call: CUDA sets the context it retained,
/// HIP selects device 0 (both keep it per thread).
pub(crate) enum Current {
    Context(unsafe extern "C" fn(*mut c_void) -> Status, Handle),
    Device(unsafe extern "C" fn(c_int) -> Status),
}

/// How a status becomes a message.
#[derive(Clone, Copy)]
pub(crate) enum ErrorText {
    /// `cuGetErrorString(status, &text)`.
    Cuda(unsafe extern "C" fn(Status, *mut *const c_char) -> Status),
    /// `hipGetErrorString(status)`.
    Hip(unsafe extern "C" fn(Status) -> *const c_char),
}

impl ErrorText {
    /// `Ok` for status 0, else the runtime's message for it, naming `call`.
    pub fn check(self, status: Status, call: &str) -> Result<(), String> {
        if status == 0 {
            return Ok(());
        }
        let (text, vendor) = match self {
            ErrorText::Cuda(get) => {
                let mut text: *const c_char = std::ptr::null();
                // SAFETY: the driver fills `text` with a static string, or leaves it null.
                let known = unsafe { get(status, &mut text) } == 0;
                (if known { text } else { std::ptr::null() }, "CUDA")
            }
            // SAFETY: HIP returns a static NUL-terminated string for any status.
            ErrorText::Hip(get) => (unsafe { get(status) }, "HIP"),
        };
        let text = match text.is_null() {
            true => "an error the runtime does not name".into(),
            // SAFETY: a NUL-terminated static string from the runtime.
            false => unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned(),
        };
        Err(format!("{call}: {text} ({vendor} error {status})"))
    }
}

/// An opened GPU runtime: the shared calls, and what its vendor does its own way.
pub(crate) struct Runtime {
    f: Functions,
    names: &'static Names,
    current: Current,
    errors: ErrorText,
    vendor: Vendor,
    // declared last: the function pointers above point into it (`None`: into this binary)
    _library: Option<libloading::Library>,
}

impl Runtime {
    /// The runtime calling `f`, named by `names` in messages; `library` is the library `f` was
    /// looked up in, kept loaded as long as the runtime, or `None` where `f` is linked in.
    pub fn new(
        f: Functions,
        library: Option<libloading::Library>,
        vendor: Vendor,
        names: &'static Names,
        current: Current,
        errors: ErrorText,
    ) -> Runtime {
        Runtime {
            f,
            names,
            current,
            errors,
            vendor,
            _library: library,
        }
    }

    fn check(&self, status: Status, call: &str) -> Result<(), String> {
        self.errors.check(status, call)
    }

    /// Makes the device current on the calling thread.
    pub fn enter(&self) -> Result<(), String> {
        // SAFETY: the context was retained at open; device 0 exists (counted at open).
        match self.current {
            Current::Context(set, context) => self.check(unsafe { set(context.0) }, "cuCtxSetCurrent"),
            Current::Device(set) => self.check(unsafe { set(0) }, "hipSetDevice"),
        }
    }
}

impl Driver for Runtime {
    fn alloc(&self, bytes: usize) -> Result<DevicePtr, String> {
        self.enter()?;
        let mut at = 0;
        // SAFETY: `at` is a valid output; at least one byte is asked for.
        self.check(unsafe { (self.f.alloc)(&mut at, bytes.max(1)) }, self.names.alloc)?;
        Ok(at)
    }

    fn free(&self, at: DevicePtr) {
        if self.enter().is_ok() {
            // SAFETY: `at` came from `alloc` and is freed once; a failure leaks it.
            unsafe { (self.f.free)(at) };
        }
    }

    fn upload(&self, to: DevicePtr, from: &[u8]) -> Result<(), String> {
        self.enter()?;
        // SAFETY: `to` addresses at least `from.len()` bytes of device memory (the caller's).
        let status = unsafe { (self.f.to_device)(to, from.as_ptr().cast(), from.len()) };
        self.check(status, self.names.to_device)
    }

    fn download(&self, from: DevicePtr, to: &mut [u8]) -> Result<(), String> {
        self.enter()?;
        // SAFETY: as for `upload`, the other way.
        let status = unsafe { (self.f.to_host)(to.as_mut_ptr().cast(), from, to.len()) };
        self.check(status, self.names.to_host)
    }

    fn copy(&self, from: DevicePtr, to: DevicePtr, bytes: usize) -> Result<(), String> {
        self.enter()?;
        // SAFETY: both address at least `bytes` bytes of device memory (the caller's).
        self.check(unsafe { (self.f.on_device)(to, from, bytes) }, self.names.on_device)
    }

    fn load_module(&self, code: &[u8]) -> Result<Handle, String> {
        self.enter()?;
        // PTX is read as a C string; an AMDGPU object is an ELF whose size its header gives
        let mut image = code.to_vec();
        if self.vendor == Vendor::Nvidia {
            image.push(0);
        }
        let mut module = std::ptr::null_mut();
        // SAFETY: a code object the loader checked (`crate::gpu::check`); `module` a valid output.
        let status = unsafe { (self.f.load_module)(&mut module, image.as_ptr().cast()) };
        self.check(status, self.names.load_module)?;
        Ok(Handle(module))
    }

    fn unload_module(&self, module: Handle) {
        if self.enter().is_ok() {
            // SAFETY: a module `load_module` returned, unloaded once.
            unsafe { (self.f.unload_module)(module.0) };
        }
    }

    fn function(&self, module: Handle, name: &CStr) -> Result<Handle, String> {
        self.enter()?;
        let mut function = std::ptr::null_mut();
        // SAFETY: a loaded module and a NUL-terminated name.
        let status = unsafe { (self.f.function)(&mut function, module.0, name.as_ptr()) };
        self.check(status, &format!("{}({})", self.names.function, name.to_string_lossy()))?;
        Ok(Handle(function))
    }

    fn launch(&self, function: Handle, blocks: u32, threads: u32, params: &mut [*mut c_void]) -> Result<(), String> {
        self.enter()?;
        let null = std::ptr::null_mut();
        // SAFETY: `params` holds a pointer to each of the kernel's explicit arguments, as its
        // code declares them (checked at load: `crate::gpu::check`); the default stream.
        let status = unsafe {
            (self.f.launch)(
                function.0,
                blocks,
                1,
                1,
                threads,
                1,
                1,
                0,
                null,
                params.as_mut_ptr(),
                null.cast(),
            )
        };
        self.check(status, self.names.launch)
    }

    fn synchronize(&self) -> Result<(), String> {
        self.enter()?;
        // SAFETY: no arguments.
        self.check(unsafe { (self.f.synchronize)() }, self.names.synchronize)
    }
}
