//! AMD GPUs without one: `gpu` programs compiled for a gfx90a run through a stand-in HIP
//! (`tests/fixtures/fake_hip.c`, on `fake_gpu.c` as the stand-in CUDA driver is), and their
//! library calls through stand-in hipBLASLt and MIOpen (`fake_blaslt.c`, `fake_miopen.c`), by
//! the checks `gpu_runtime.rs` makes of either vendor's runtime; and the code object loaded is
//! the one for the device's chip, which the stand-in, as HIP, insists on.

use crate::gpu_runtime::{
    a_program_for_another_gpu_is_refused, library_calls_match_the_kernels, models_run_as_their_kernels_on_the_host,
    StandIn,
};
use mxc_dialects::program::GpuArch;
use mxc_dialects::{Attr, Attrs, DType, Graph, OpKind, Tensor, TensorType};
use mxc_kernels::Executable;
use std::collections::HashMap;
use std::ffi::c_int;

#[test]
fn gpu_programs_run_through_hip_as_their_kernels_run_on_the_host() {
    models_run_as_their_kernels_on_the_host(&StandIn::hip());
}

#[test]
fn a_program_only_for_another_amd_chip_is_refused_naming_the_device() {
    a_program_for_another_gpu_is_refused(&StandIn::hip(), "gfx942");
}

#[test]
fn gpu_library_calls_run_through_hipblaslt_and_miopen_and_match_the_kernels() {
    library_calls_match_the_kernels(&StandIn::hip());
}

/// Whether the stand-in's device properties name its chip.
fn say_chip(s: &StandIn, say: bool) {
    // SAFETY: the stand-in's function takes an int.
    unsafe {
        s.library
            .get::<unsafe extern "C" fn(c_int)>(b"fake_hip_say_chip")
            .unwrap()(say as c_int)
    }
}

/// A device that names its chip is given that chip's code object alone; where it does not, each
/// AMD object is tried in turn and HIP refuses those for other chips, saying so when it refuses
/// them all.
#[test]
fn the_code_object_for_the_devices_chip_is_the_one_loaded() {
    let s = StandIn::hip();
    // a softmax: a row kernel, a block of threads a row
    let mut graph = Graph::new("softmax");
    let x = graph.add_input("x", TensorType::new(DType::F32, vec![4, 300]));
    let attrs = Attrs::new().with("axis", Attr::Int(1));
    let y = graph.build1(OpKind::Softmax, vec![x], attrs).unwrap();
    graph.add_output("y", y);
    let chips = |names: &[&str]| -> Vec<GpuArch> { names.iter().map(|n| n.parse().unwrap()).collect() };
    let (gpu, host) = s.compile_for(&graph, &chips(&["gfx942", "gfx90a"]));
    let on_host = Executable::load(host.program, &host.library).unwrap();
    let values: Vec<f32> = (0..1200).map(|i| (i % 37) as f32 * 0.25 - 4.0).collect();
    let inputs = HashMap::from([("x".to_string(), Tensor::from_f32s(vec![4, 300], &values))]);
    let expected = on_host.run(&inputs).unwrap();
    let gfx90a = GpuArch::Amd("gfx90a".into());
    for say in [true, false] {
        say_chip(&s, say);
        assert_eq!(s.open().arch, say.then(|| gfx90a.clone()));
        let exe = s.load(&gpu).unwrap();
        assert_eq!(
            exe.device().map(|(_, arch)| arch),
            Some(&gfx90a),
            "the chip said: {say}"
        );
        assert_eq!(exe.run(&inputs).unwrap(), expected);
    }
    let (other, _) = s.compile_for(&graph, &chips(&["gfx942"]));
    let err = s.load(&other).err().expect("refused");
    let device = format!("{} (architecture unknown, through {})", s.name, s.path.display());
    let refused = "the code for gfx942: hipModuleLoadData: \
                   no kernel image is available for execution on the device (HIP error 209)";
    assert!(err.contains(&format!("{device}: {refused}")), "{err}");
    assert_eq!(s.counter("fake_gpu_live_allocations"), 0, "everything freed");
}
