//! Loop-level MLIR text → LLVM IR text: parse and verify with melior, run MLIR's conversions
//! to the LLVM dialect, translate. With the bare-pointer calling convention every kernel
//! becomes `void @<symbol>(ptr, ..., ptr)`, one pointer per memref argument; the only
//! external functions the result calls are libm's (`expf`, `erff`, `tanhf`, `powf`, ...).

use super::LoopError;
use melior::dialect::DialectRegistry;
use melior::ir::operation::{OperationLike, OperationMutLike, WalkOrder, WalkResult};
use melior::ir::Module;
use melior::pass::PassManager;
use melior::utility::{
    parse_pass_pipeline, register_all_dialects, register_all_llvm_translations, register_all_passes,
};
use melior::Context;
use std::cell::RefCell;
use std::ffi::CStr;
use std::rc::Rc;

/// The conversion to the LLVM dialect, in order: affine (unused by the `ref` kernels, there
/// for later targets) and structured control flow to blocks, vector ops (the cpu target's
/// loads, stores, masks, reductions) to LLVM vector instructions, math to LLVM intrinsics (and
/// what has none, such as `erf`, to libm calls), memref views (`reinterpret_cast`) to plain
/// descriptors and memrefs to pointers, then arith, control flow and functions, whose memref
/// arguments become bare pointers; last, the casts left between the converted pieces go. AMX
/// tiles (`amx.rs`) convert with the vector ops, and control flow through the conversion
/// interfaces, whose type converter knows the tiles a loop carries.
pub const PIPELINE: &str = "builtin.module(\
lower-affine,\
convert-scf-to-cf,\
convert-vector-to-llvm{enable-amx=true},\
convert-math-to-llvm,\
convert-math-to-libm,\
expand-strided-metadata,\
finalize-memref-to-llvm,\
convert-arith-to-llvm,\
convert-to-llvm{filter-dialects=cf,amx},\
convert-func-to-llvm{use-bare-ptr-memref-call-conv=1},\
reconcile-unrealized-casts)";

/// A reusable MLIR → LLVM IR translator (creating the MLIR context is the costly part).
pub struct MlirToLlvm {
    context: Context,
}

impl Default for MlirToLlvm {
    fn default() -> Self {
        Self::new()
    }
}

impl MlirToLlvm {
    pub fn new() -> MlirToLlvm {
        let registry = DialectRegistry::new();
        register_all_dialects(&registry);
        register_all_passes();
        let context = Context::new();
        context.append_dialect_registry(&registry);
        context.load_all_available_dialects();
        register_all_llvm_translations(&context);
        MlirToLlvm { context }
    }

    /// Translates a module of loop-level kernels to LLVM IR text.
    pub fn translate(&self, mlir: &str) -> Result<String, LoopError> {
        self.run_pipeline(mlir, &[PIPELINE], "conversion to the LLVM dialect", |module, fail| {
            translate_to_llvm_ir(module).ok_or_else(|| fail("translation to LLVM IR", "the module does not translate"))
        })
    }

    /// Parses and verifies `mlir`, runs `pipelines` on it in turn (`stage` names them in
    /// errors; after each, any loop annotations move into their branches: `move_loop_annotations`)
    /// and hands the result to `then`; every error carries MLIR's diagnostics (`then` makes its
    /// own with the function it is given: a stage and a fallback message).
    pub(super) fn run_pipeline<T>(
        &self,
        mlir: &str,
        pipelines: &[&str],
        stage: &'static str,
        then: impl FnOnce(&Module, &dyn Fn(&'static str, &str) -> LoopError) -> Result<T, LoopError>,
    ) -> Result<T, LoopError> {
        let diagnostics = Rc::new(RefCell::new(Vec::<String>::new()));
        let sink = diagnostics.clone();
        let handler = self.context.attach_diagnostic_handler(move |d| {
            let mut text = format!("{}: {d}", d.location());
            for i in 0..d.note_count() {
                if let Ok(note) = d.note(i) {
                    text.push_str(&format!("\n  note: {note}"));
                }
            }
            sink.borrow_mut().push(text);
            true
        });
        let fail = |stage: &'static str, fallback: &str| {
            let seen = diagnostics.borrow();
            let message = if seen.is_empty() {
                fallback.to_string()
            } else {
                seen.join("\n")
            };
            LoopError::Mlir { stage, message }
        };
        let result = self
            .run(mlir, pipelines, stage, &fail)
            .and_then(|module| then(&module, &fail));
        self.context.detach_diagnostic_handler(handler);
        result
    }

    fn run(
        &self,
        mlir: &str,
        pipelines: &[&str],
        stage: &'static str,
        fail: &dyn Fn(&'static str, &str) -> LoopError,
    ) -> Result<Module<'_>, LoopError> {
        let mut module =
            Module::parse(&self.context, mlir).ok_or_else(|| fail("parse", "the module does not parse"))?;
        if !module.as_operation().verify() {
            return Err(fail("verify", "the module does not verify"));
        }
        // only a module that annotates loops needs the walk (the cpu kernels annotate none)
        let annotated = mlir.contains(CARRIED_LOOP_ANNOTATION);
        for pipeline in pipelines {
            let passes = PassManager::new(&self.context);
            parse_pass_pipeline(passes.as_operation_pass_manager(), pipeline).map_err(|e| LoopError::Mlir {
                stage: "pass pipeline",
                message: e.to_string(),
            })?;
            passes.run(&mut module).map_err(|_| fail(stage, "a pass failed"))?;
            if annotated {
                move_loop_annotations(&mut module);
            }
        }
        Ok(module)
    }
}

/// The name under which an `scf.for`'s `llvm.loop_annotation` (unroll it or not, ...) reaches
/// the branch that closes its loop: MLIR 22 carries it there as a discardable attribute of
/// `cf.br`, then of `llvm.br`, whose own `loop_annotation` (what translation reads) stays
/// empty.
const CARRIED_LOOP_ANNOTATION: &str = "llvm.loop_annotation";

/// Moves each `llvm.br`'s carried loop annotation into its `loop_annotation`, so that LLVM sees
/// it (as `!llvm.loop` metadata).
fn move_loop_annotations(module: &mut Module) {
    module.as_operation_mut().walk_mut(WalkOrder::PreOrder, |mut op| {
        if op.name().as_string_ref().as_str() == Ok("llvm.br") {
            if let Ok(annotation) = op.discardable_attribute(CARRIED_LOOP_ANNOTATION) {
                op.set_inherent_attribute("loop_annotation", annotation);
                let _ = op.remove_discardable_attribute(CARRIED_LOOP_ANNOTATION);
            }
        }
        WalkResult::Advance
    });
}

/// LLVM IR text of a module in the LLVM dialect, or `None` if it does not translate.
fn translate_to_llvm_ir(module: &Module) -> Option<String> {
    // SAFETY: the LLVM context and module are created, used and disposed of here only; the
    // MLIR module outlives the call; a null module (failed translation) is checked before use
    // and the printed string is copied before it is freed.
    unsafe {
        let context = mlir_sys::LLVMContextCreate();
        let llvm_module = mlir_sys::mlirTranslateModuleToLLVMIR(module.as_operation().to_raw(), context);
        let text = if llvm_module.is_null() {
            None
        } else {
            let raw = mlir_sys::LLVMPrintModuleToString(llvm_module);
            let text = CStr::from_ptr(raw).to_string_lossy().into_owned();
            mlir_sys::LLVMDisposeMessage(raw);
            mlir_sys::LLVMDisposeModule(llvm_module);
            Some(text)
        };
        mlir_sys::LLVMContextDispose(context);
        text
    }
}

/// Translates loop-level MLIR text to LLVM IR text with a fresh translator.
pub fn to_llvm_ir(mlir: &str) -> Result<String, LoopError> {
    MlirToLlvm::new().translate(mlir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parse_error_carries_the_diagnostic() {
        let err = to_llvm_ir("func.func @f( {").unwrap_err().to_string();
        assert!(err.starts_with("MLIR parse:"), "{err}");
        assert!(err.contains("1:"), "the location is given: {err}");
    }

    #[test]
    fn a_verifier_error_is_reported() {
        let bad = "func.func @f(%a: memref<2xf32>) {\n  %c = arith.constant 0 : i32\n  %x = memref.load %a[%c] : memref<2xf32>\n  return\n}\n";
        let err = to_llvm_ir(bad).unwrap_err().to_string();
        assert!(err.starts_with("MLIR "), "{err}");
    }

    #[test]
    fn a_loop_annotation_reaches_llvm() {
        let mlir = "func.func @k0_zero(%out0: memref<16xf32>) {\n  %c0 = arith.constant 0 : index\n  \
                    %c1 = arith.constant 1 : index\n  %c16 = arith.constant 16 : index\n  \
                    %z = arith.constant 0.0 : f32\n  scf.for %i = %c0 to %c16 step %c1 {\n    \
                    memref.store %z, %out0[%i] : memref<16xf32>\n  } {llvm.loop_annotation = \
                    #llvm.loop_annotation<unroll = #llvm.loop_unroll<disable = true>>}\n  return\n}\n";
        let ir = to_llvm_ir(mlir).unwrap();
        assert!(
            ir.contains("!llvm.loop") && ir.contains("llvm.loop.unroll.disable"),
            "{ir}"
        );
    }

    #[test]
    fn kernels_take_one_pointer_per_memref() {
        let mlir = "func.func @k0_copy(%in0: memref<2x3xf32>, %out0: memref<2x3xf32>) {\n  %c0 = arith.constant 0 : index\n  %x = memref.load %in0[%c0, %c0] : memref<2x3xf32>\n  memref.store %x, %out0[%c0, %c0] : memref<2x3xf32>\n  return\n}\n";
        let translator = MlirToLlvm::new();
        for _ in 0..2 {
            let ir = translator.translate(mlir).unwrap();
            assert!(ir.contains("define void @k0_copy(ptr %0, ptr %1)"), "{ir}");
        }
    }
}
