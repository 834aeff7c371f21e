#pragma once
// The "torch" communicator backend: dsp's collectives over a torch.distributed process group, for
// processes started by torchrun (or any launcher followed by init_process_group), so no MPI is
// needed. The extension links no LibTorch: each op calls a Python channel (python/dsp/_pg.py, a
// gloo group of its own over the process group's ranks) with numpy views of the caller's host
// buffers, launched asynchronously, then polls the op with the GIL released, so the rank's
// communication threads and the user's Python thread share the interpreter only to launch and
// to poll.
//
//  * Every communicator is one more gloo group, made in creation order (ranks create their
//    communicators in the same order: boot, control, one per worker kind), so ops of different
//    communicators run concurrently without deadlock.
//  * An op that does not complete within its timeout (CommOptions, DSP_COMM_TIMEOUT, per op)
//    ends the job naming the op, its label and the backend; a failed op (a peer gone) ends it
//    too. abort_job writes the message under the key dsp/abort of the process group's store and
//    exits; every rank checks that key about once a second while it waits, and ends with the
//    message it finds there.
//  * Host memory only (memory_space host); ops complete on return. Argument checks and byte
//    counters are ccc/detail's, as for every backend.
#include <pybind11/pybind11.h>

namespace dsp::pyext {

// Registers the backend under kTorchBackend (once, at module import).
void register_torch_backend();
// The Python group (dsp._pg.Group) that the next communicators of the backend are made over;
// dsp.Loader sets it before it makes its rank's runtime. Needs the GIL.
void set_torch_group(pybind11::object group);

inline constexpr const char* kTorchBackend = "torch";

}  // namespace dsp::pyext
