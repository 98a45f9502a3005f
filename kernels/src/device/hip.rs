//! The HIP runtime API (`libamdhip64`), as far as mxc calls it: device 0, memory, copies,
//! code-object modules and launches. Only the functions' C signatures are declared; the one
//! structure read, the device properties (whose layout changed across ROCm releases), is
//! filled into a large zeroed buffer and only searched for the chip's name (`gfx90a:…`).

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
type Properties = unsafe extern "C" fn(*mut c_void, c_int) -> Status;

/// Bytes given to the device-properties call: several times any release's structure.
const PROPERTIES_BYTES: usize = 16 << 10;

struct Functions {
    set_device: unsafe extern "C" fn(c_int) -> Status,
    malloc: unsafe extern "C" fn(*mut *mut c_void, usize) -> Status,
    free: unsafe extern "C" fn(*mut c_void) -> Status,
    copy_to_device: unsafe extern "C" fn(*mut c_void, *const c_void, usize) -> Status,
    copy_to_host: unsafe extern "C" fn(*mut c_void, *mut c_void, usize) -> Status,
    copy_on_device: unsafe extern "C" fn(*mut c_void, *mut c_void, usize) -> Status,
    module_load_data: unsafe extern "C" fn(*mut *mut c_void, *const c_void) -> Status,
    module_unload: unsafe extern "C" fn(*mut c_void) -> Status,
    module_get_function: unsafe extern "C" fn(*mut *mut c_void, *mut c_void, *const c_char) -> Status,
    module_launch_kernel: Launch,
    device_synchronize: unsafe extern "C" fn() -> Status,
    get_error_string: unsafe extern "C" fn(Status) -> *const c_char,
}

pub(crate) struct Hip {
    f: Functions,
    // declared last: the function pointers above point into it
    _library: libloading::Library,
}

impl Hip {
    /// Initialises HIP on device 0; returns it with the device's name and chip.
    pub fn open(library: libloading::Library) -> Result<(Hip, String, Option<GpuArch>), String> {
        let lib = &library;
        // SAFETY: each type is the HIP API's signature of the function named.
        let (f, init, count, get_name) = unsafe {
            (
                Functions {
                    set_device: symbol(lib, "hipSetDevice")?,
                    malloc: symbol(lib, "hipMalloc")?,
                    free: symbol(lib, "hipFree")?,
                    copy_to_device: symbol(lib, "hipMemcpyHtoD")?,
                    copy_to_host: symbol(lib, "hipMemcpyDtoH")?,
                    copy_on_device: symbol(lib, "hipMemcpyDtoD")?,
                    module_load_data: symbol(lib, "hipModuleLoadData")?,
                    module_unload: symbol(lib, "hipModuleUnload")?,
                    module_get_function: symbol(lib, "hipModuleGetFunction")?,
                    module_launch_kernel: symbol(lib, "hipModuleLaunchKernel")?,
                    device_synchronize: symbol(lib, "hipDeviceSynchronize")?,
                    get_error_string: symbol(lib, "hipGetErrorString")?,
                },
                symbol::<unsafe extern "C" fn(c_uint) -> Status>(lib, "hipInit")?,
                symbol::<unsafe extern "C" fn(*mut c_int) -> Status>(lib, "hipGetDeviceCount")?,
                symbol::<unsafe extern "C" fn(*mut c_char, c_int, c_int) -> Status>(lib, "hipDeviceGetName")?,
            )
        };
        // ROCm 6 renamed the call when the structure changed; older releases have the plain name
        // SAFETY: the signature of both names.
        let properties: Option<Properties> = unsafe {
            symbol(lib, "hipGetDevicePropertiesR0600")
                .or_else(|_| symbol(lib, "hipGetDeviceProperties"))
                .ok()
        };
        let hip = Hip { f, _library: library };
        let mut devices = 0;
        let mut name = [0u8; 256];
        // SAFETY: HIP's documented calls, each output a valid pointer of its type.
        unsafe {
            hip.check(init(0), "hipInit")?;
            hip.check(count(&mut devices), "hipGetDeviceCount")?;
            if devices == 0 {
                return Err("HIP finds no GPU".into());
            }
            hip.enter()?;
            hip.check(get_name(name.as_mut_ptr().cast(), 255, 0), "hipDeviceGetName")?;
        }
        let arch = properties.and_then(|call| {
            let mut props = vec![0u8; PROPERTIES_BYTES];
            // SAFETY: the buffer is larger than any release's structure.
            let status = unsafe { call(props.as_mut_ptr().cast(), 0) };
            (status == 0).then(|| chip_in(&props)).flatten()
        });
        Ok((hip, c_text(&name), arch))
    }

    /// `Ok` for status 0, else HIP's message for it, naming `call`.
    fn check(&self, status: Status, call: &str) -> Result<(), String> {
        if status == 0 {
            return Ok(());
        }
        // SAFETY: HIP returns a static NUL-terminated string for any status.
        let text = unsafe { (self.f.get_error_string)(status) };
        let text = match text.is_null() {
            true => "an error HIP does not name".into(),
            // SAFETY: as above.
            false => unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned(),
        };
        Err(format!("{call}: {text} (HIP error {status})"))
    }

    /// Makes device 0 current on the calling thread (HIP's device is per thread).
    fn enter(&self) -> Result<(), String> {
        // SAFETY: device 0 exists (counted at open).
        self.check(unsafe { (self.f.set_device)(0) }, "hipSetDevice")
    }
}

/// The chip named in a device-properties structure: its `gcnArchName` (`gfx90a:sramecc+:xnack-`),
/// the first C string there starting `gfx` followed by a letter or digit.
fn chip_in(props: &[u8]) -> Option<GpuArch> {
    (0..props.len().saturating_sub(4)).find_map(|at| {
        let starts = props[at..].starts_with(b"gfx") && (at == 0 || props[at - 1] == 0);
        if !starts {
            return None;
        }
        let name = c_text(&props[at..]);
        name.split(':').next()?.parse().ok()
    })
}

impl Driver for Hip {
    fn alloc(&self, bytes: usize) -> Result<DevicePtr, String> {
        self.enter()?;
        let mut at = std::ptr::null_mut();
        // SAFETY: `at` is a valid output; at least one byte is asked for.
        self.check(unsafe { (self.f.malloc)(&mut at, bytes.max(1)) }, "hipMalloc")?;
        Ok(at as DevicePtr)
    }

    fn free(&self, at: DevicePtr) {
        if self.enter().is_ok() {
            // SAFETY: `at` came from `alloc` and is freed once; a failure leaks it.
            unsafe { (self.f.free)(at as *mut c_void) };
        }
    }

    fn upload(&self, to: DevicePtr, from: &[u8]) -> Result<(), String> {
        self.enter()?;
        // SAFETY: `to` addresses at least `from.len()` bytes of device memory (the caller's).
        self.check(
            unsafe { (self.f.copy_to_device)(to as *mut c_void, from.as_ptr().cast(), from.len()) },
            "hipMemcpyHtoD",
        )
    }

    fn download(&self, from: DevicePtr, to: &mut [u8]) -> Result<(), String> {
        self.enter()?;
        // SAFETY: as for `upload`, the other way.
        self.check(
            unsafe { (self.f.copy_to_host)(to.as_mut_ptr().cast(), from as *mut c_void, to.len()) },
            "hipMemcpyDtoH",
        )
    }

    fn copy(&self, from: DevicePtr, to: DevicePtr, bytes: usize) -> Result<(), String> {
        self.enter()?;
        // SAFETY: both address at least `bytes` bytes of device memory (the caller's).
        self.check(
            unsafe { (self.f.copy_on_device)(to as *mut c_void, from as *mut c_void, bytes) },
            "hipMemcpyDtoD",
        )
    }

    fn load_module(&self, code: &[u8]) -> Result<Handle, String> {
        self.enter()?;
        let mut module = std::ptr::null_mut();
        // SAFETY: a code object the loader checked (`crate::gpu::check`); `module` a valid output.
        self.check(
            unsafe { (self.f.module_load_data)(&mut module, code.as_ptr().cast()) },
            "hipModuleLoadData",
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
            &format!("hipModuleGetFunction({})", name.to_string_lossy()),
        )?;
        Ok(Handle(function))
    }

    fn launch(&self, function: Handle, blocks: u32, threads: u32, params: &mut [*mut c_void]) -> Result<(), String> {
        self.enter()?;
        // SAFETY: `params` holds a pointer to each of the kernel's explicit arguments, as its
        // metadata declares them (checked at load: `crate::gpu::check`).
        let status = unsafe {
            (self.f.module_launch_kernel)(
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
        self.check(status, "hipModuleLaunchKernel")
    }

    fn synchronize(&self) -> Result<(), String> {
        self.enter()?;
        // SAFETY: no arguments.
        self.check(unsafe { (self.f.device_synchronize)() }, "hipDeviceSynchronize")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chip_is_found_in_the_properties_whatever_their_layout() {
        let mut props = vec![0u8; 2048];
        props[..18].copy_from_slice(b"AMD Instinct MI210");
        props[1000..1022].copy_from_slice(b"gfx90a:sramecc+:xnack-");
        assert_eq!(chip_in(&props), Some(GpuArch::Amd("gfx90a".into())));
        // a `gfx` inside another string is not the chip's name
        let mut props = vec![0u8; 64];
        props[..10].copy_from_slice(b"Radeon gfx");
        assert_eq!(chip_in(&props), None);
    }
}
