//! GPUs, reached at run time without linking a vendor's runtime: HIP (`libamdhip64.so`, then
//! the `.so.7`, `.6`, `.5` of ROCm releases, under `$ROCM_PATH/lib`, `/opt/rocm/lib` and the
//! loader's path) for AMD GPUs, the CUDA driver (`libcuda.so.1`) for NVIDIA's, or the library
//! `$MXC_GPU_RUNTIME` names. Each is opened with `libloading` and only the functions mxc calls
//! are looked up (`hip.rs`, `cuda.rs`; the calls both share, `runtime.rs`), behind one `Driver`
//! interface, so a binary built here starts anywhere. Each vendor's first library that opens
//! is tried, the first that finds a device used; a `gpu` program on a machine without a GPU is
//! refused naming every library looked for and what each tried said. A build with the
//! `hip-sys` feature links HIP instead (against an installed ROCm) and tries it in place of
//! HIP's library files: its functions fill the same tables, and all after is the same code.
//! `Gpu::choose` picks the code object the device runs. The libraries that library calls need
//! are found the same way (`library.rs`) and bound in `blaslt.rs` (hipBLASLt, cuBLASLt) and
//! `miopen.rs`.

pub(crate) mod blaslt;
mod cuda;
mod hip;
pub(crate) mod library;
pub(crate) mod miopen;
mod runtime;

use crate::RunError;
use mxc_dialects::program::{CodeFormat, CodeObject, GpuArch};
use std::ffi::{c_void, CStr};
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    Amd,
    Nvidia,
}

impl Vendor {
    /// The code format its GPUs run.
    pub fn format(self) -> CodeFormat {
        match self {
            Vendor::Amd => CodeFormat::Hsaco,
            Vendor::Nvidia => CodeFormat::Ptx,
        }
    }

    /// The vendor whose runtime a library file is, by its name (`libcuda.so.1`, `libamdhip64.so`).
    pub fn of_library(path: &str) -> Option<Vendor> {
        let name = path.rsplit('/').next().unwrap_or(path);
        if name.contains("cuda") {
            Some(Vendor::Nvidia)
        } else if name.contains("hip") {
            Some(Vendor::Amd)
        } else {
            None
        }
    }
}

/// An address in a GPU's memory.
pub type DevicePtr = u64;

/// A runtime object (a loaded module, a kernel function), opaque to mxc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handle(pub(crate) *mut c_void);

// SAFETY: module and function handles are process-wide in both runtimes, usable from any
// thread once the device's context is current there (which each driver call makes it).
unsafe impl Send for Handle {}
unsafe impl Sync for Handle {}

/// What mxc asks of a GPU runtime: device 0's memory, copies, code loading and launches.
/// Errors are the runtime's own messages, with the call that failed.
pub(crate) trait Driver: Send + Sync {
    fn alloc(&self, bytes: usize) -> Result<DevicePtr, String>;
    fn free(&self, at: DevicePtr);
    fn upload(&self, to: DevicePtr, from: &[u8]) -> Result<(), String>;
    fn download(&self, from: DevicePtr, to: &mut [u8]) -> Result<(), String>;
    fn copy(&self, from: DevicePtr, to: DevicePtr, bytes: usize) -> Result<(), String>;
    /// Loads a code object (an AMDGPU ELF, or NUL-terminated PTX).
    fn load_module(&self, code: &[u8]) -> Result<Handle, String>;
    fn unload_module(&self, module: Handle);
    fn function(&self, module: Handle, name: &CStr) -> Result<Handle, String>;
    /// Launches `blocks` blocks of `threads` threads of `function` on the default stream,
    /// `params` pointing at each argument's value.
    fn launch(&self, function: Handle, blocks: u32, threads: u32, params: &mut [*mut c_void]) -> Result<(), String>;
    /// Waits until every launch and copy is done.
    fn synchronize(&self) -> Result<(), String>;
}

/// The GPU a program runs on: its runtime, opened and initialised, and what it says device 0 is.
pub struct Gpu {
    pub vendor: Vendor,
    /// The runtime library's path as it was opened, or `LINKED_HIP`.
    pub library: String,
    /// The device's name (`NVIDIA H200`, `AMD Instinct MI210`).
    pub name: String,
    /// Its architecture (`sm_90`, `gfx90a`), where the runtime says it.
    pub arch: Option<GpuArch>,
    pub(crate) driver: Box<dyn Driver>,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}, through {})", self.name, self.arch_name(), self.library)
    }
}

/// How messages and `Gpu::library` name the HIP a build with the `hip-sys` feature links.
#[cfg(feature = "hip-sys")]
pub const LINKED_HIP: &str = "libamdhip64 (linked into this build)";

/// Where a GPU runtime may be.
#[derive(Debug, PartialEq)]
enum Source {
    /// A library file, or a name the loader looks for, of the vendor's API.
    File(Vendor, String),
    /// The HIP this build links.
    #[cfg(feature = "hip-sys")]
    LinkedHip,
}

impl Source {
    fn vendor(&self) -> Vendor {
        match self {
            Source::File(vendor, _) => *vendor,
            #[cfg(feature = "hip-sys")]
            Source::LinkedHip => Vendor::Amd,
        }
    }

    fn name(&self) -> &str {
        match self {
            Source::File(_, path) => path,
            #[cfg(feature = "hip-sys")]
            Source::LinkedHip => LINKED_HIP,
        }
    }

    /// Device 0 of the runtime here, or why it has none; `None` where there is no runtime
    /// (the file does not open).
    fn open(&self) -> Option<Result<Gpu, RunError>> {
        match self {
            Source::File(vendor, path) => {
                // SAFETY: opening a GPU vendor's runtime runs its initialisers, as linking it would.
                let library = unsafe { libloading::Library::new(path) }.ok()?;
                Some(Gpu::open(library, *vendor, path))
            }
            #[cfg(feature = "hip-sys")]
            Source::LinkedHip => Some(Gpu::opened(Vendor::Amd, LINKED_HIP, hip::open_linked())),
        }
    }
}

/// Every runtime looked for, in order: the library `named` (`$MXC_GPU_RUNTIME`) alone, of the
/// vendor its name says (an error when it says neither); else HIP, then the CUDA driver.
fn candidates(named: Option<PathBuf>) -> Result<Vec<Source>, RunError> {
    if let Some(path) = named {
        let path = path.display().to_string();
        return match Vendor::of_library(&path) {
            Some(vendor) => Ok(vec![Source::File(vendor, path)]),
            None => Err(RunError::NoGpu(format!(
                "MXC_GPU_RUNTIME names {path}, which is neither a CUDA driver nor a HIP runtime by its name"
            ))),
        };
    }
    let mut out = hip_sources();
    out.push(Source::File(Vendor::Nvidia, "libcuda.so.1".to_string()));
    Ok(out)
}

/// HIP's library files: `libamdhip64.so`, then ROCm releases' `.so.N`, each under ROCm's
/// folders and then alone.
#[cfg(not(feature = "hip-sys"))]
fn hip_sources() -> Vec<Source> {
    let hip = [
        "libamdhip64.so",
        "libamdhip64.so.7",
        "libamdhip64.so.6",
        "libamdhip64.so.5",
    ];
    library::places(&library::rocm_folders(), &hip)
        .into_iter()
        .map(|path| Source::File(Vendor::Amd, path))
        .collect()
}

/// The HIP this build links, in place of any library file.
#[cfg(feature = "hip-sys")]
fn hip_sources() -> Vec<Source> {
    vec![Source::LinkedHip]
}

impl Gpu {
    /// Device 0 of the first runtime that opens and initialises, or an error naming every
    /// runtime looked for and what each tried said.
    pub fn find() -> Result<Gpu, RunError> {
        Gpu::first_of(&candidates(library::var("MXC_GPU_RUNTIME"))?)
    }

    /// `find` among `sources`: a vendor's first that opens is its runtime (the others are the
    /// same one's other files or releases), tried, and the next vendor's if it finds no device.
    fn first_of(sources: &[Source]) -> Result<Gpu, RunError> {
        let mut said = String::new();
        let mut tried = Vec::new();
        for source in sources {
            if tried.contains(&source.vendor()) {
                continue;
            }
            match source.open() {
                Some(Ok(gpu)) => return Ok(gpu),
                Some(Err(e)) => {
                    said += &format!("; {e}");
                    tried.push(source.vendor());
                }
                None => {}
            }
        }
        let names: Vec<&str> = sources.iter().map(Source::name).collect();
        Err(RunError::NoGpu(format!(
            "no GPU runtime was found: looked for HIP and the CUDA driver as {}{said}",
            names.join(", ")
        )))
    }

    /// Device 0 of the runtime library at `path`, of `vendor`'s API.
    pub fn open_library(path: &str, vendor: Vendor) -> Result<Gpu, RunError> {
        // SAFETY: as in `Source::open`.
        let library = unsafe { libloading::Library::new(path) }
            .map_err(|e| RunError::NoGpu(format!("the GPU runtime {path}: {e}")))?;
        Gpu::open(library, vendor, path)
    }

    fn open(library: libloading::Library, vendor: Vendor, path: &str) -> Result<Gpu, RunError> {
        let opened = match vendor {
            Vendor::Amd => hip::open(library),
            Vendor::Nvidia => cuda::open(library),
        };
        Gpu::opened(vendor, path, opened)
    }

    /// The GPU of a runtime of `vendor`, named `library`, as opening it went.
    fn opened(
        vendor: Vendor,
        library: &str,
        opened: Result<(runtime::Runtime, String, Option<GpuArch>), String>,
    ) -> Result<Gpu, RunError> {
        let (runtime, name, arch) = opened.map_err(|e| RunError::NoGpu(format!("{library}: {e}")))?;
        Ok(Gpu {
            vendor,
            library: library.to_string(),
            name,
            arch,
            driver: Box::new(runtime),
        })
    }

    fn arch_name(&self) -> &str {
        self.arch.as_ref().map_or("architecture unknown", GpuArch::name)
    }

    /// The code objects of `objects` to try on this device, best first: on NVIDIA GPUs the PTX
    /// of the newest architecture not newer than the device's (the driver compiles PTX for its
    /// device and any later one; an `a` architecture runs only on itself); on AMD GPUs the
    /// device's chip's, or, where the runtime did not say the chip, every AMD one (the
    /// runtime refuses the others at load). An error names the device and what `objects` has.
    pub fn choose<'a>(&self, objects: &'a [CodeObject]) -> Result<Vec<&'a CodeObject>, RunError> {
        let mine: Vec<&CodeObject> = objects.iter().filter(|o| o.format == self.vendor.format()).collect();
        let chosen: Vec<&CodeObject> = match (&self.arch, self.vendor) {
            (None, _) => mine,
            (Some(arch), Vendor::Amd) => mine.into_iter().filter(|o| &o.arch == arch).collect(),
            (Some(arch), Vendor::Nvidia) => {
                let device = sm_number(arch.name());
                let runs = |o: &&CodeObject| match (sm_number(o.arch.name()), device) {
                    (Some((n, true)), Some((d, _))) => n == d,
                    (Some((n, false)), Some((d, _))) => n <= d,
                    _ => false,
                };
                let mut fit: Vec<&CodeObject> = mine.into_iter().filter(runs).collect();
                fit.sort_by_key(|o| std::cmp::Reverse(sm_number(o.arch.name())));
                fit
            }
        };
        if chosen.is_empty() {
            let archs: Vec<&str> = objects.iter().map(|o| o.arch.name()).collect();
            return Err(RunError::NoGpu(format!(
                "{} ({}, through {}) runs none of the program's code, which is for {} (compile it with --gpu-arch {})",
                self.name,
                self.arch_name(),
                self.library,
                archs.join(", "),
                self.arch.as_ref().map_or("<this GPU's architecture>", GpuArch::name)
            )));
        }
        Ok(chosen)
    }
}

/// `sm_90` → (90, false); `sm_90a` → (90, true).
fn sm_number(arch: &str) -> Option<(u32, bool)> {
    let digits = arch.strip_prefix("sm_")?;
    let (digits, specific) = match digits.strip_suffix('a') {
        Some(d) => (d, true),
        None => (digits, false),
    };
    Some((digits.parse().ok()?, specific))
}

/// Looks up `name` in `library` as a function pointer of type `F`.
///
/// # Safety
/// `F` must be the function's C signature; the pointer is valid while `library` is loaded.
unsafe fn symbol<F: Copy>(library: &libloading::Library, name: &str) -> Result<F, String> {
    // SAFETY: as the caller promises.
    unsafe { library.get::<F>(name.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| format!("the runtime has no `{name}`: {e}"))
}

/// The text of a C string a runtime filled in (at most `buf.len()` bytes, NUL-terminated).
fn c_text(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(arch: &str) -> CodeObject {
        let arch: GpuArch = arch.parse().unwrap();
        let format = match arch {
            GpuArch::Amd(_) => CodeFormat::Hsaco,
            GpuArch::Nvidia(_) => CodeFormat::Ptx,
        };
        CodeObject {
            arch,
            format,
            bytes: Vec::new(),
        }
    }

    /// A `Gpu` with no runtime behind it, for `choose`.
    struct NoDriver;
    impl Driver for NoDriver {
        fn alloc(&self, _: usize) -> Result<DevicePtr, String> {
            Err("none".into())
        }
        fn free(&self, _: DevicePtr) {}
        fn upload(&self, _: DevicePtr, _: &[u8]) -> Result<(), String> {
            Err("none".into())
        }
        fn download(&self, _: DevicePtr, _: &mut [u8]) -> Result<(), String> {
            Err("none".into())
        }
        fn copy(&self, _: DevicePtr, _: DevicePtr, _: usize) -> Result<(), String> {
            Err("none".into())
        }
        fn load_module(&self, _: &[u8]) -> Result<Handle, String> {
            Err("none".into())
        }
        fn unload_module(&self, _: Handle) {}
        fn function(&self, _: Handle, _: &CStr) -> Result<Handle, String> {
            Err("none".into())
        }
        fn launch(&self, _: Handle, _: u32, _: u32, _: &mut [*mut c_void]) -> Result<(), String> {
            Err("none".into())
        }
        fn synchronize(&self) -> Result<(), String> {
            Ok(())
        }
    }

    fn gpu(vendor: Vendor, arch: Option<&str>) -> Gpu {
        Gpu {
            vendor,
            library: "lib".into(),
            name: "a GPU".into(),
            arch: arch.map(|a| a.parse().unwrap()),
            driver: Box::new(NoDriver),
        }
    }

    #[test]
    fn the_code_a_device_runs_is_chosen_by_its_architecture() {
        let objects = [
            object("gfx90a"),
            object("gfx942"),
            object("sm_80"),
            object("sm_90"),
            object("sm_90a"),
        ];
        let names =
            |g: &Gpu| -> Vec<String> { g.choose(&objects).unwrap().iter().map(|o| o.arch.to_string()).collect() };
        assert_eq!(names(&gpu(Vendor::Nvidia, Some("sm_90"))), ["sm_90a", "sm_90", "sm_80"]);
        assert_eq!(names(&gpu(Vendor::Nvidia, Some("sm_100"))), ["sm_90", "sm_80"]);
        assert_eq!(names(&gpu(Vendor::Nvidia, Some("sm_86"))), ["sm_80"]);
        assert_eq!(names(&gpu(Vendor::Amd, Some("gfx942"))), ["gfx942"]);
        assert_eq!(names(&gpu(Vendor::Amd, None)), ["gfx90a", "gfx942"]);
        let err = gpu(Vendor::Amd, Some("gfx1100"))
            .choose(&objects)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("a GPU (gfx1100, through lib) runs none of the program's code, which is for gfx90a, gfx942, sm_80, sm_90, sm_90a (compile it with --gpu-arch gfx1100)"),
            "{err}"
        );
        let err = gpu(Vendor::Nvidia, Some("sm_75"))
            .choose(&objects)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--gpu-arch sm_75"), "{err}");
    }

    /// A vendor's runtime that opens but fails is its only one tried; the next vendor's is
    /// tried after it, and the message says what each said.
    #[test]
    fn a_runtime_that_opens_but_fails_ends_its_vendors_search_only() {
        let sources = [
            Source::File(Vendor::Amd, "libc.so.6".into()),
            Source::File(Vendor::Amd, "libm.so.6".into()),
            Source::File(Vendor::Nvidia, "/nonexistent/libcuda.so.1".into()),
            Source::File(Vendor::Nvidia, "libc.so.6".into()),
        ];
        let err = Gpu::first_of(&sources).unwrap_err().to_string();
        let looked = "no GPU runtime was found: looked for HIP and the CUDA driver as \
                      libc.so.6, libm.so.6, /nonexistent/libcuda.so.1, libc.so.6; \
                      libc.so.6: the runtime has no `hipInit`: ";
        assert!(err.starts_with(looked), "{err}");
        assert!(err.contains("; libc.so.6: the runtime has no `cuInit`: "), "{err}");
        assert!(!err.contains("; libm.so.6:"), "{err}");
    }

    /// Opening the HIP a `hip-sys` build links, with the CUDA driver after it; on a machine
    /// without an AMD GPU (no `/dev/kfd`), HIP's first call refuses, and the message says so.
    #[cfg(feature = "hip-sys")]
    #[test]
    fn this_build_opens_the_hip_it_links() {
        let sources = candidates(None).unwrap();
        assert_eq!(
            sources,
            [Source::LinkedHip, Source::File(Vendor::Nvidia, "libcuda.so.1".into())]
        );
        match Gpu::first_of(&sources) {
            Ok(gpu) => assert!([LINKED_HIP, "libcuda.so.1"].contains(&gpu.library.as_str()), "{gpu:?}"),
            Err(e) => {
                let e = e.to_string();
                let looked = format!(
                    "no GPU runtime was found: looked for HIP and the CUDA driver as {LINKED_HIP}, libcuda.so.1; \
                     {LINKED_HIP}: "
                );
                assert!(e.starts_with(&looked), "{e}");
                // without the AMD GPU driver's device file HIP cannot start: its first call refuses
                if !std::path::Path::new("/dev/kfd").exists() {
                    let said = &e[looked.len()..];
                    assert!(said.starts_with("hipInit: ") && said.contains(" (HIP error "), "{e}");
                }
            }
        }
    }

    #[test]
    fn a_runtime_is_known_by_its_file_name() {
        assert_eq!(Vendor::of_library("/usr/lib/libcuda.so.1"), Some(Vendor::Nvidia));
        assert_eq!(Vendor::of_library("/opt/rocm/lib/libamdhip64.so.6"), Some(Vendor::Amd));
        assert_eq!(Vendor::of_library("/tmp/libfoo.so"), None);
    }
}
