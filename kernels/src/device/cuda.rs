//! The CUDA driver API (`libcuda.so.1`), as far as mxc calls it: device 0's primary context,
//! memory, copies, PTX modules (compiled by the driver at load) and launches. Only the
//! functions' C signatures are declared, none of the driver's structures.

use super::{c_text, symbol, DevicePtr, Driver, Handle};
use mxc_dialects::program::GpuArch;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};

type Status = c_int;
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

/// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR` and `_MINOR`.
const COMPUTE_CAPABILITY_MAJOR: c_int = 75;
const COMPUTE_CAPABILITY_MINOR: c_int = 76;

struct Functions {
    ctx_set_current: unsafe extern "C" fn(*mut c_void) -> Status,
    mem_alloc: unsafe extern "C" fn(*mut DevicePtr, usize) -> Status,
    mem_free: unsafe extern "C" fn(DevicePtr) -> Status,
    copy_to_device: unsafe extern "C" fn(DevicePtr, *const c_void, usize) -> Status,
    copy_to_host: unsafe extern "C" fn(*mut c_void, DevicePtr, usize) -> Status,
    copy_on_device: unsafe extern "C" fn(DevicePtr, DevicePtr, usize) -> Status,
    module_load_data: unsafe extern "C" fn(*mut *mut c_void, *const c_void) -> Status,
    module_unload: unsafe extern "C" fn(*mut c_void) -> Status,
    module_get_function: unsafe extern "C" fn(*mut *mut c_void, *mut c_void, *const c_char) -> Status,
    launch_kernel: Launch,
    ctx_synchronize: unsafe extern "C" fn() -> Status,
    get_error_string: unsafe extern "C" fn(Status, *mut *const c_char) -> Status,
}

pub(crate) struct Cuda {
    f: Functions,
    context: Handle,
    // declared last: the function pointers above point into it
    _library: libloading::Library,
}

impl Cuda {
    /// Initialises the driver and makes device 0's primary context; returns it with the
    /// device's name and architecture.
    pub fn open(library: libloading::Library) -> Result<(Cuda, String, Option<GpuArch>), String> {
        let lib = &library;
        // SAFETY: each type is the CUDA driver API's signature of the function named.
        let (f, init, device_get, get_name, get_attribute, retain) = unsafe {
            (
                Functions {
                    ctx_set_current: symbol(lib, "cuCtxSetCurrent")?,
                    mem_alloc: symbol(lib, "cuMemAlloc_v2")?,
                    mem_free: symbol(lib, "cuMemFree_v2")?,
                    copy_to_device: symbol(lib, "cuMemcpyHtoD_v2")?,
                    copy_to_host: symbol(lib, "cuMemcpyDtoH_v2")?,
                    copy_on_device: symbol(lib, "cuMemcpyDtoD_v2")?,
                    module_load_data: symbol(lib, "cuModuleLoadData")?,
                    module_unload: symbol(lib, "cuModuleUnload")?,
                    module_get_function: symbol(lib, "cuModuleGetFunction")?,
                    launch_kernel: symbol(lib, "cuLaunchKernel")?,
                    ctx_synchronize: symbol(lib, "cuCtxSynchronize")?,
                    get_error_string: symbol(lib, "cuGetErrorString")?,
                },
                symbol::<unsafe extern "C" fn(c_uint) -> Status>(lib, "cuInit")?,
                symbol::<unsafe extern "C" fn(*mut c_int, c_int) -> Status>(lib, "cuDeviceGet")?,
                symbol::<unsafe extern "C" fn(*mut c_char, c_int, c_int) -> Status>(lib, "cuDeviceGetName")?,
                symbol::<unsafe extern "C" fn(*mut c_int, c_int, c_int) -> Status>(lib, "cuDeviceGetAttribute")?,
                symbol::<unsafe extern "C" fn(*mut *mut c_void, c_int) -> Status>(lib, "cuDevicePrimaryCtxRetain")?,
            )
        };
        let mut cuda = Cuda {
            f,
            context: Handle(std::ptr::null_mut()),
            _library: library,
        };
        let mut device = 0;
        let mut name = [0u8; 256];
        let (mut major, mut minor) = (0, 0);
        let mut context = std::ptr::null_mut();
        // SAFETY: the driver's documented calls, each output a valid pointer of its type.
        unsafe {
            cuda.check(init(0), "cuInit")?;
            cuda.check(device_get(&mut device, 0), "cuDeviceGet")?;
            cuda.check(get_name(name.as_mut_ptr().cast(), 255, device), "cuDeviceGetName")?;
            cuda.check(
                get_attribute(&mut major, COMPUTE_CAPABILITY_MAJOR, device),
                "cuDeviceGetAttribute",
            )?;
            cuda.check(
                get_attribute(&mut minor, COMPUTE_CAPABILITY_MINOR, device),
                "cuDeviceGetAttribute",
            )?;
            cuda.check(retain(&mut context, device), "cuDevicePrimaryCtxRetain")?;
        }
        cuda.context = Handle(context);
        let arch = format!("sm_{major}{minor}").parse().ok();
        Ok((cuda, c_text(&name), arch))
    }

    /// `Ok` for status 0, else the driver's message for it, naming `call`.
    fn check(&self, status: Status, call: &str) -> Result<(), String> {
        if status == 0 {
            return Ok(());
        }
        let mut message: *const c_char = std::ptr::null();
        // SAFETY: the driver fills `message` with a static string, or leaves it null.
        let known = unsafe { (self.f.get_error_string)(status, &mut message) } == 0 && !message.is_null();
        let text = match known {
            // SAFETY: a NUL-terminated static string from the driver.
            true => unsafe { CStr::from_ptr(message) }.to_string_lossy().into_owned(),
            false => "an error the driver does not name".into(),
        };
        Err(format!("{call}: {text} (CUDA error {status})"))
    }

    /// Makes the context current on the calling thread (a context is current per thread).
    fn enter(&self) -> Result<(), String> {
        // SAFETY: the context was retained at open and lives as long as the process.
        self.check(unsafe { (self.f.ctx_set_current)(self.context.0) }, "cuCtxSetCurrent")
    }
}

impl Driver for Cuda {
    fn alloc(&self, bytes: usize) -> Result<DevicePtr, String> {
        self.enter()?;
        let mut at = 0;
        // SAFETY: `at` is a valid output; at least one byte is asked for.
        self.check(unsafe { (self.f.mem_alloc)(&mut at, bytes.max(1)) }, "cuMemAlloc")?;
        Ok(at)
    }

    fn free(&self, at: DevicePtr) {
        if self.enter().is_ok() {
            // SAFETY: `at` came from `alloc` and is freed once; a failure leaks it.
            unsafe { (self.f.mem_free)(at) };
        }
    }

    fn upload(&self, to: DevicePtr, from: &[u8]) -> Result<(), String> {
        self.enter()?;
        // SAFETY: `to` addresses at least `from.len()` bytes of device memory (the caller's).
        self.check(
            unsafe { (self.f.copy_to_device)(to, from.as_ptr().cast(), from.len()) },
            "cuMemcpyHtoD",
        )
    }

    fn download(&self, from: DevicePtr, to: &mut [u8]) -> Result<(), String> {
        self.enter()?;
        // SAFETY: as for `upload`, the other way.
        self.check(
            unsafe { (self.f.copy_to_host)(to.as_mut_ptr().cast(), from, to.len()) },
            "cuMemcpyDtoH",
        )
    }

    fn copy(&self, from: DevicePtr, to: DevicePtr, bytes: usize) -> Result<(), String> {
        self.enter()?;
        // SAFETY: both address at least `bytes` bytes of device memory (the caller's).
        self.check(unsafe { (self.f.copy_on_device)(to, from, bytes) }, "cuMemcpyDtoD")
    }

    fn load_module(&self, code: &[u8]) -> Result<Handle, String> {
        self.enter()?;
        // PTX is loaded as a C string
        let mut text = code.to_vec();
        text.push(0);
        let mut module = std::ptr::null_mut();
        // SAFETY: a NUL-terminated image; `module` a valid output.
        self.check(
            unsafe { (self.f.module_load_data)(&mut module, text.as_ptr().cast()) },
            "cuModuleLoadData",
        )?;
        Ok(Handle(module))
    }

    fn unload_module(&self, module: Handle) {
        if self.enter().is_ok() {
            // SAFETY: a module `load_module` returned, unloaded once.
            unsafe { (self.f.module_unload)(module.0) };
        }
    }

    fn function(&self, module: Handle, name: &CStr) -> Result<Handle, String> {
        self.enter()?;
        let mut function = std::ptr::null_mut();
        // SAFETY: a loaded module and a NUL-terminated name.
        self.check(
            unsafe { (self.f.module_get_function)(&mut function, module.0, name.as_ptr()) },
            &format!("cuModuleGetFunction({})", name.to_string_lossy()),
        )?;
        Ok(Handle(function))
    }

    fn launch(&self, function: Handle, blocks: u32, threads: u32, params: &mut [*mut c_void]) -> Result<(), String> {
        self.enter()?;
        // SAFETY: `params` holds a pointer to each of the kernel's arguments, as its PTX
        // declares them (checked at load: `crate::gpu::check`).
        let status = unsafe {
            (self.f.launch_kernel)(
                function.0,
                blocks,
                1,
                1,
                threads,
                1,
                1,
                0,
                std::ptr::null_mut(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        self.check(status, "cuLaunchKernel")
    }

    fn synchronize(&self) -> Result<(), String> {
        self.enter()?;
        // SAFETY: no arguments.
        self.check(unsafe { (self.f.ctx_synchronize)() }, "cuCtxSynchronize")
    }
}
