//! The HIP runtime API (`libamdhip64`): its names for the shared calls (`runtime.rs`), and
//! opening it: initialise, count the devices, device 0's name and chip. The functions come
//! from a library opened at run time, looked up by name, or, in a build with the `hip-sys`
//! feature, from the HIP that build links (hip-sys's); either way they fill one `Calls`, and
//! opening and everything after it is the same code. Only C signatures are declared; the one
//! structure read, the device properties (whose layout changed across ROCm releases), is
//! filled into a large zeroed buffer and only searched for the chip's name (`gfx90a:…`).

use super::runtime::{Current, ErrorText, Functions, Names, Runtime, Status};
use super::{c_text, symbol, Vendor};
use mxc_dialects::program::GpuArch;
use std::ffi::{c_char, c_int, c_uint, c_void};

const NAMES: Names = Names {
    alloc: "hipMalloc",
    free: "hipFree",
    to_device: "hipMemcpyHtoD",
    to_host: "hipMemcpyDtoH",
    on_device: "hipMemcpyDtoD",
    load_module: "hipModuleLoadData",
    unload_module: "hipModuleUnload",
    function: "hipModuleGetFunction",
    launch: "hipModuleLaunchKernel",
    synchronize: "hipDeviceSynchronize",
};

type Properties = unsafe extern "C" fn(*mut c_void, c_int) -> Status;

/// Bytes given to the device-properties call: several times any release's structure.
const PROPERTIES_BYTES: usize = 16 << 10;

/// The HIP functions mxc calls: its own for opening and the shared ones.
struct Calls {
    init: unsafe extern "C" fn(c_uint) -> Status,
    count: unsafe extern "C" fn(*mut c_int) -> Status,
    get_name: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> Status,
    set_device: unsafe extern "C" fn(c_int) -> Status,
    errors: ErrorText,
    /// The device properties, where the runtime has the call.
    properties: Option<Properties>,
    shared: Functions,
}

impl Calls {
    /// The functions of `lib`, by their names.
    fn look_up(lib: &libloading::Library) -> Result<Calls, String> {
        // SAFETY: each type is the HIP API's signature of the function named.
        unsafe {
            Ok(Calls {
                init: symbol(lib, "hipInit")?,
                count: symbol(lib, "hipGetDeviceCount")?,
                get_name: symbol(lib, "hipDeviceGetName")?,
                set_device: symbol(lib, "hipSetDevice")?,
                errors: ErrorText::Hip(symbol(lib, "hipGetErrorString")?),
                // ROCm 6 renamed the call when the structure changed; older releases have the
                // plain name (the signature of both)
                properties: symbol(lib, "hipGetDevicePropertiesR0600")
                    .or_else(|_| symbol(lib, "hipGetDeviceProperties"))
                    .ok(),
                shared: Functions::look_up(lib, &NAMES)?,
            })
        }
    }

    /// The functions of the HIP this build links, hip-sys's. Each is taken by its address and
    /// typed by the C signature of the field it fills, as `look_up` types what the loader
    /// returns; hip-sys declares the same C functions and differs only in how Rust reads their
    /// values: a status as its `hipError_t` enum (where one its bindings do not list, from a
    /// later ROCm, would be undefined behaviour) is a plain `c_int` here, and a device address
    /// (`hipDeviceptr_t`, a pointer) the table's 64-bit `DevicePtr`, which C passes alike.
    #[cfg(feature = "hip-sys")]
    fn linked() -> Calls {
        use hip_sys::hiprt;
        // SAFETY: each field's type is the HIP API's C signature of the function it is given.
        unsafe {
            Calls {
                init: c_function(hiprt::hipInit as *const ()),
                count: c_function(hiprt::hipGetDeviceCount as *const ()),
                get_name: c_function(hiprt::hipDeviceGetName as *const ()),
                set_device: c_function(hiprt::hipSetDevice as *const ()),
                errors: ErrorText::Hip(c_function(hiprt::hipGetErrorString as *const ())),
                // the plain name: hip-sys's bindings predate ROCm 6's renamed call
                properties: Some(c_function(hiprt::hipGetDeviceProperties as *const ())),
                shared: Functions {
                    alloc: c_function(hiprt::hipMalloc as *const ()),
                    free: c_function(hiprt::hipFree as *const ()),
                    to_device: c_function(hiprt::hipMemcpyHtoD as *const ()),
                    to_host: c_function(hiprt::hipMemcpyDtoH as *const ()),
                    on_device: c_function(hiprt::hipMemcpyDtoD as *const ()),
                    load_module: c_function(hiprt::hipModuleLoadData as *const ()),
                    unload_module: c_function(hiprt::hipModuleUnload as *const ()),
                    function: c_function(hiprt::hipModuleGetFunction as *const ()),
                    launch: c_function(hiprt::hipModuleLaunchKernel as *const ()),
                    synchronize: c_function(hiprt::hipDeviceSynchronize as *const ()),
                },
            }
        }
    }
}

/// The function at `address` as the function pointer type `F`.
///
/// # Safety
/// `F` must be a C signature of that function.
#[cfg(feature = "hip-sys")]
unsafe fn c_function<F: Copy>(address: *const ()) -> F {
    const { assert!(std::mem::size_of::<F>() == std::mem::size_of::<*const ()>()) };
    // SAFETY: `F` is a function pointer type (pointer-sized, as checked), as the caller promises.
    unsafe { std::mem::transmute_copy(&address) }
}

/// Initialises the HIP of `library`; returns the runtime (device 0 made current on each
/// thread before a call) with the device's name and chip.
pub fn open(library: libloading::Library) -> Result<(Runtime, String, Option<GpuArch>), String> {
    let calls = Calls::look_up(&library)?;
    start(calls, Some(library))
}

/// As `open`, the HIP this build links.
#[cfg(feature = "hip-sys")]
pub fn open_linked() -> Result<(Runtime, String, Option<GpuArch>), String> {
    start(Calls::linked(), None)
}

/// `open` through `calls`, which point into `library` (`None`: into this binary).
fn start(calls: Calls, library: Option<libloading::Library>) -> Result<(Runtime, String, Option<GpuArch>), String> {
    let Calls {
        init,
        count,
        get_name,
        set_device,
        errors,
        properties,
        shared,
    } = calls;
    let mut devices = 0;
    let mut name = [0u8; 256];
    // SAFETY: HIP's documented calls, each output a valid pointer of its type.
    unsafe {
        errors.check(init(0), "hipInit")?;
        errors.check(count(&mut devices), "hipGetDeviceCount")?;
        if devices == 0 {
            return Err("HIP finds no GPU".into());
        }
        errors.check(set_device(0), "hipSetDevice")?;
        errors.check(get_name(name.as_mut_ptr().cast(), 255, 0), "hipDeviceGetName")?;
    }
    let arch = properties.and_then(|call| {
        let mut props = vec![0u8; PROPERTIES_BYTES];
        // SAFETY: the buffer is larger than any release's structure.
        let status = unsafe { call(props.as_mut_ptr().cast(), 0) };
        (status == 0).then(|| chip_in(&props)).flatten()
    });
    let current = Current::Device(set_device);
    let runtime = Runtime::new(shared, library, Vendor::Amd, &NAMES, current, errors);
    Ok((runtime, c_text(&name), arch))
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

    /// Each linked function is the one of its name in the HIP library this process loaded (the
    /// build links it), as the loaded build would look it up; a status is passed as the plain
    /// integer it is, so HIP names one its bindings do not list as it does the others.
    #[cfg(feature = "hip-sys")]
    #[test]
    fn the_linked_calls_are_hips_own() {
        fn addresses(c: &Calls) -> Vec<usize> {
            let ErrorText::Hip(error_text) = c.errors else {
                panic!("HIP's calls with another vendor's error text")
            };
            let f = &c.shared;
            vec![
                c.init as usize,
                c.count as usize,
                c.get_name as usize,
                c.set_device as usize,
                error_text as usize,
                c.properties.map_or(0, |p| p as usize),
                f.alloc as usize,
                f.free as usize,
                f.to_device as usize,
                f.to_host as usize,
                f.on_device as usize,
                f.load_module as usize,
                f.unload_module as usize,
                f.function as usize,
                f.launch as usize,
                f.synchronize as usize,
            ]
        }
        let this: libloading::Library = libloading::os::unix::Library::this().into();
        let mut looked_up = Calls::look_up(&this).unwrap();
        // hip-sys binds the plain name, where ROCm 6 also has the renamed call
        // SAFETY: the signature of the name.
        looked_up.properties = unsafe { symbol(&this, "hipGetDeviceProperties") }.ok();
        let linked = Calls::linked();
        assert_eq!(addresses(&linked), addresses(&looked_up));
        for status in [1, 100, 101, 999, 12345, -1] {
            assert_eq!(
                linked.errors.check(status, "call"),
                looked_up.errors.check(status, "call"),
                "{status}"
            );
            let message = linked.errors.check(status, "call").unwrap_err();
            assert!(
                message.starts_with("call: ") && message.ends_with(&format!(" (HIP error {status})")),
                "{message}"
            );
        }
    }
}
