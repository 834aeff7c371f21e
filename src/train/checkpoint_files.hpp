#pragma once
// The files of dsp train's checkpoints in --checkpoint-dir: checkpoint-<E>.pt, written after
// epoch E (rank 0; each rank's embedding shard beside it, <file>.embedding.<r>-of-<P>), the newest
// --keep-checkpoints of them kept; checkpoint.pt (and its shards) a hard link to the newest, for
// what reads "the checkpoint" (dsp predict, dsp.load_model, plain --resume); best.pt apart.
// Every file is written under a temporary name and renamed, so a kill leaves no torn file under
// a final name; --resume auto still verifies each (checksums) before it trusts one.
#include <cstdint>
#include <string>
#include <vector>

namespace dsp {

// DIR/checkpoint-<E>.pt: the checkpoint written after E epochs.
std::string rotated_checkpoint(const std::string& dir, int64_t epochs);
// The epochs E of the files DIR/checkpoint-<E>.pt<suffix>, newest first (suffix "": the
// checkpoints; an embedding shard's ".embedding.<r>-of-<P>": one rank's shards). None when DIR
// does not exist.
std::vector<int64_t> rotated_epochs(const std::string& dir, const std::string& suffix = "");
// Makes `to` the file `from` atomically: a hard link (a copy where the file system has none)
// under `to`.tmp.<pid>, renamed onto `to`. IoError naming both and the system's reason.
void link_file_atomic(const std::string& from, const std::string& to);
// Once checkpoint-<E>.pt<suffix> is complete: removes DIR/checkpoint-<E'>.pt<suffix> for E' > E
// (another run's in the same directory, or damaged ones --resume auto skipped: this run trains
// those epochs again) and all but the newest `keep` of the others.
void prune_checkpoints(const std::string& dir, const std::string& suffix, int64_t epochs, int keep);
// The files an earlier run left in DIR (checkpoint.pt, best.pt, checkpoint-<E>.pt and their
// embedding shards, any temporary ones), names sorted; none when DIR does not exist.
std::vector<std::string> earlier_run_files(const std::string& dir);
// A new run's --checkpoint-dir: InvalidArgument naming DIR and (some of) its files when an earlier
// run left files there, unless `overwrite`, which removes them (every rank may: a file already
// gone is no error). Nothing when `dir` is empty.
void claim_checkpoint_dir(const std::string& dir, bool overwrite);

// A --metrics file (JSON lines, each with its "epoch" numbered from 1) cut to the records of
// epochs 1..E, rewritten atomically: a run resumed after epoch E then appends each later epoch
// once, so an interrupted run's file ends as an uninterrupted one's (a record written after the
// checkpoint, and a line torn by a kill, are dropped). No file: nothing to do.
void truncate_metrics(const std::string& path, int64_t epochs);

// What dsp train says when interrupted after `done` of `epochs` epochs (core/interrupt.hpp's
// note): where it stood and how to continue: from the newest checkpoint (written after `saved`
// epochs, 0: none) with --resume auto (in place of --overwrite when the run was given it), or
// what to give so that a run can be continued.
std::string interrupt_note(int64_t done, int64_t epochs, const std::string& dir, int64_t saved,
                           bool overwrite);

}  // namespace dsp
