package objstore

import (
	"context"
	"errors"
	"strings"
)

// errFolderFound stops a listing of Entries at the first name of a folder.
var errFolderFound = errors.New("folder found")

// Entries calls fn, in lexical order, for every entry directly below
// prefix (which is "" or ends in '/'): each folder once, by its name
// without the trailing '/', with folder true and no Info, and each object
// that lies directly in prefix, with its Info (named relative to prefix). It lists as a delimiter listing
// does, without the objects inside the folders: after the first name of a
// folder it lists again from the first name past the folder, so it costs
// one list call per folder whatever the folders hold.
func Entries(ctx context.Context, s Store, prefix string, fn func(name string, folder bool, info Info) error) error {
	start := prefix
	for {
		var folder string
		err := s.List(ctx, prefix, start, func(info Info) error {
			rest := info.Name[len(prefix):]
			if i := strings.IndexByte(rest, '/'); i >= 0 {
				folder = rest[:i]
				return errFolderFound
			}
			info.Name = rest
			return fn(rest, false, info)
		})
		switch {
		case errors.Is(err, errFolderFound):
		case err != nil:
			return err
		default:
			return nil // listed to the end
		}
		if err := fn(folder, true, Info{}); err != nil {
			return err
		}
		// '0' is the byte after '/': the first name past every name in
		// the folder.
		start = prefix + folder + "0"
	}
}
