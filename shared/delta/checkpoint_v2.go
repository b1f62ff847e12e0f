package delta

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

// V2 checkpoints (PROTOCOL.md "V2 Checkpoint Table Feature", "V2 Spec"): a
// top-level file, UUID-named (JSON or Parquet) or classic-named (Parquet),
// holds one checkpointMetadata action, every non-file action, and either
// every add and remove or sidecar actions naming Parquet files in
// _delta_log/_sidecars that hold them. A V1 checkpoint has neither
// checkpointMetadata nor sidecars; loadCheckpoint reads both kinds.

// sidecarDir is where sidecar files live (PROTOCOL.md "Sidecar Files").
const sidecarDir = logDir + "_sidecars/"

// loadCheckpoint calls apply for every action of cp's state: the
// checkpoint's own rows, then the file actions of its sidecars. The V2
// actions themselves are checked, not applied.
func loadCheckpoint(ctx context.Context, store objstore.Store, cp *checkpointRef, apply func(*Action)) error {
	var (
		meta     []CheckpointMetadata
		sidecars []Sidecar
	)
	collect := func(a *Action) {
		switch {
		case a.CheckpointMetadata != nil:
			meta = append(meta, *a.CheckpointMetadata)
		case a.Sidecar != nil:
			sidecars = append(sidecars, *a.Sidecar)
		default:
			apply(a)
		}
	}
	if cp.embedded != nil {
		for i := range cp.embedded.NonFileActions {
			collect(&cp.embedded.NonFileActions[i])
		}
		sidecars = append(sidecars, cp.embedded.SidecarFiles...)
	} else {
		for _, f := range cp.files {
			if err := readCheckpointFile(ctx, store, f, collect); err != nil {
				return err
			}
		}
	}
	if err := checkV2Actions(cp, meta, len(sidecars)); err != nil {
		return err
	}
	return readSidecars(ctx, store, sidecars, apply)
}

// checkV2Actions enforces the V2 spec's shape: a UUID-named checkpoint, or
// one with sidecars, carries exactly one checkpointMetadata of its own
// version (PROTOCOL.md "V2 Spec", "Checkpoint Metadata"), and a multi-part
// checkpoint is always V1 (PROTOCOL.md "Allowed combinations for
// checkpoint spec <-> checkpoint file naming").
func checkV2Actions(cp *checkpointRef, meta []CheckpointMetadata, sidecars int) error {
	if !cp.uuidNamed && len(meta) == 0 && sidecars == 0 {
		return nil // V1 spec
	}
	name := cp.files[0].Name
	switch {
	case len(cp.files) > 1:
		return fmt.Errorf("%w: multi-part checkpoint %s has checkpointMetadata or sidecar actions, which only V2 checkpoints may have", ErrCorruptLog, name)
	case len(meta) != 1:
		return fmt.Errorf("%w: V2 checkpoint %s has %d checkpointMetadata actions, want exactly 1", ErrCorruptLog, name, len(meta))
	case meta[0].Version != cp.version:
		return fmt.Errorf("%w: V2 checkpoint %s has checkpointMetadata version %d, want %d", ErrCorruptLog, name, meta[0].Version, cp.version)
	}
	return nil
}

// readSidecars reads the sidecar files concurrently and applies their add
// and remove actions in sidecar order. Sidecars hold only file actions
// "as of now" (PROTOCOL.md "Sidecar Files"); anything else is ignored.
func readSidecars(ctx context.Context, store objstore.Store, sidecars []Sidecar, apply func(*Action)) error {
	decoded := make([][]Action, len(sidecars))
	err := parallel(ctx, len(sidecars), func(ctx context.Context, i int) error {
		s := sidecars[i]
		name, err := sidecarName(s.Path)
		if err != nil {
			return err
		}
		b, err := readObject(ctx, store, name)
		if err != nil {
			return fmt.Errorf("%w: sidecar %s: %w", ErrCorruptLog, name, err)
		}
		if s.SizeInBytes > 0 && int64(len(b)) != s.SizeInBytes {
			return fmt.Errorf("%w: sidecar %s is %d bytes, the checkpoint says %d", ErrCorruptLog, name, len(b), s.SizeInBytes)
		}
		err = decodeCheckpoint(b, func(a *Action) {
			if a.Add != nil || a.Remove != nil {
				decoded[i] = append(decoded[i], *a)
			}
		})
		if err != nil {
			return fmt.Errorf("%w: sidecar %s: %w", ErrCorruptLog, name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, actions := range decoded {
		for j := range actions {
			apply(&actions[j])
		}
	}
	return nil
}

// sidecarName maps a sidecar action's path to its object name. The path is
// URI-encoded and, since sidecars "must always reside in the table's own
// _delta_log/_sidecars directory" (PROTOCOL.md "Sidecar File
// Information"), only its last segment counts: a full URI written by a
// writer that saw the table elsewhere still resolves here.
func sidecarName(path string) (string, error) {
	base := path[strings.LastIndexByte(path, '/')+1:]
	name, err := url.PathUnescape(base)
	if err != nil || name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return "", fmt.Errorf("%w: sidecar path %q names no file in %s", ErrCorruptLog, path, sidecarDir)
	}
	return sidecarDir + name, nil
}
