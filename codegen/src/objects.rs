//! The kernels' object code and the shared object linking it. Each kernel is its own object,
//! compiled under a content-addressed name (`cache::Key::symbol`) and taken from the persistent
//! cache when there; the others are translated to LLVM IR one kernel per module on this thread
//! and compiled on worker threads meanwhile. An object depends only on its kernel's key, so the
//! library is the same whichever kernels came from the cache.

use crate::cache::{Cache, Key};
use crate::llvm::Machine;
use crate::plan::llvm_entry_name;
use crate::{link, workers, CodegenError, OptLevel, Target};
use mxc_lowering::loops::{KernelSpec, MlirToLlvm};
use std::collections::HashSet;
use std::path::Path;

/// How many distinct kernel objects came from the persistent cache and how many were compiled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Whether a cache was used (asked for and its folder usable).
    pub enabled: bool,
    pub hits: usize,
    pub misses: usize,
}

/// A kernel to compile: where its object goes, its key and its MLIR module.
struct Miss {
    slot: usize,
    key: Key,
    mlir: String,
    arity: usize,
}

/// The shared object of `kernels` for `target`, with the cache under `cache_root` if given.
pub fn library(
    kernels: &[KernelSpec],
    target: Target,
    opt: OptLevel,
    cache_root: Option<&Path>,
) -> Result<(Vec<u8>, CacheStats), CodegenError> {
    let machine = Machine::new(target, opt)?;
    let cache = cache_root.and_then(Cache::open);
    let mut objects: Vec<Option<Vec<u8>>> = Vec::new();
    let mut seen = HashSet::new();
    let mut misses = Vec::new();
    let mut aliases = Vec::with_capacity(kernels.len());
    for k in kernels {
        let arity = k.args.len() + usize::from(k.takes_sizes);
        let key = Key::of(&k.func, &k.symbol, arity, machine.description());
        aliases.push((llvm_entry_name(&k.symbol), llvm_entry_name(&key.symbol())));
        if !seen.insert(key) {
            continue;
        }
        let cached = cache.as_ref().and_then(|c| c.get(&key));
        if cached.is_none() {
            let func = k
                .func
                .replacen(&format!("@{}(", k.symbol), &format!("@{}(", key.symbol()), 1);
            misses.push(Miss {
                slot: objects.len(),
                key,
                mlir: format!("module {{\n{func}}}\n"),
                arity,
            });
        }
        objects.push(cached);
    }
    let stats = CacheStats {
        enabled: cache.is_some(),
        hits: objects.len() - misses.len(),
        misses: misses.len(),
    };
    for (i, object) in compile_all(&misses, target, opt)? {
        if let Some(cache) = &cache {
            // A cache that cannot be written to only costs the next compile time.
            let _ = cache.put(&misses[i].key, &object);
        }
        objects[misses[i].slot] = Some(object);
    }
    let objects: Vec<Vec<u8>> = objects
        .into_iter()
        .collect::<Option<_>>()
        .ok_or_else(|| CodegenError::Llvm("a kernel's object is missing".into()))?;
    Ok((link::shared_object(&objects, &aliases)?, stats))
}

/// Compiles `misses` (index into `misses`, object): MLIR → LLVM IR on this thread, LLVM IR →
/// object on up to as many threads as the machine has cores. Workers drain the queue even after
/// an error, so the sender never waits on a queue nobody reads.
fn compile_all(misses: &[Miss], target: Target, opt: OptLevel) -> Result<Vec<(usize, Vec<u8>)>, CodegenError> {
    if misses.is_empty() {
        return Ok(Vec::new());
    }
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(misses.len());
    let translator = MlirToLlvm::new();
    let mut failure = None;
    let mut done = workers::run(
        workers,
        || Machine::new(target, opt),
        |machine, (i, ir): (usize, String)| {
            let object = match machine {
                Ok(machine) => machine.compile_object(&ir, &[(&misses[i].key.symbol(), misses[i].arity)]),
                Err(e) => Err(CodegenError::Llvm(e.to_string())),
            };
            (i, object)
        },
        |send| {
            // the longest kernels first, so that no long one is left for the end on one thread
            let mut order: Vec<usize> = (0..misses.len()).collect();
            order.sort_by_key(|&i| std::cmp::Reverse(misses[i].mlir.len()));
            for i in order {
                match translator.translate(&misses[i].mlir) {
                    Ok(ir) => {
                        if !send((i, ir)) {
                            break;
                        }
                    }
                    Err(e) => {
                        failure = Some(CodegenError::from(e));
                        break;
                    }
                }
            }
        },
    );
    if let Some(e) = failure {
        return Err(e);
    }
    done.sort_by_key(|(i, _)| *i);
    if done.len() != misses.len() {
        return Err(CodegenError::Llvm("a compile thread stopped".into()));
    }
    done.into_iter().map(|(i, object)| object.map(|o| (i, o))).collect()
}

#[cfg(test)]
mod tests {
    use crate::{compile, CacheStats, CompileOptions, Target};
    use mxc_dialects::{Attrs, DType, Graph, OpKind, TensorType};

    #[test]
    fn compiling_and_linking_again_gives_the_same_library() {
        let mut g = Graph::new("twice");
        let x = g.add_input("x", TensorType::new(DType::F32, vec![4, 5]));
        let s = g.build1(OpKind::Sigmoid, vec![x], Attrs::new()).unwrap();
        let y = g.build1(OpKind::Tanh, vec![s], Attrs::new()).unwrap();
        g.add_output("y", y);
        let options = CompileOptions {
            fusion: false,
            ..CompileOptions::default()
        };
        let a = compile(&g, Target::Cpu, &options).unwrap();
        let b = compile(&g, Target::Cpu, &options).unwrap();
        let stats = CacheStats {
            enabled: false,
            hits: 0,
            misses: 2,
        };
        assert_eq!((a.cache, b.cache), (stats, stats));
        assert!(a.library == b.library, "two links of the same objects differ");
    }
}
