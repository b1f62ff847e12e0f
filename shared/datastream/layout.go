package datastream

import (
	"path"
	"strings"
	"time"
)

// ObjectPath is a file's name split by the layout Datastream writes in:
// <stream prefix><object folder>/YYYY/MM/DD/HH/mm/<file name>.
type ObjectPath struct {
	// Prefix is the stream's root path: "" or a path ending in '/'.
	Prefix string
	// Object is the object folder (<schema>_<table>, ambiguous: the table
	// id comes from source_metadata).
	Object string
	// Folder is the minute folder's time, UTC.
	Folder time.Time
	// File is the file's own name.
	File string
}

// folderLayout is the time folders' layout, as time.Parse reads it.
const folderLayout = "2006/01/02/15/04"

// ParseObjectPath splits a file's name by Datastream's layout; ok is false
// when the name does not have its shape (an object folder, five time
// folders with a valid minute, a file name).
func ParseObjectPath(name string) (p ObjectPath, ok bool) {
	parts := strings.Split(name, "/")
	n := len(parts)
	if n < 7 || parts[n-7] == "" || parts[n-1] == "" {
		return ObjectPath{}, false
	}
	for i, want := range []int{4, 2, 2, 2, 2} {
		if len(parts[n-6+i]) != want {
			return ObjectPath{}, false
		}
	}
	folder, err := time.Parse(folderLayout, strings.Join(parts[n-6:n-1], "/"))
	if err != nil {
		return ObjectPath{}, false
	}
	prefix := strings.Join(parts[:n-7], "/")
	if prefix != "" {
		prefix += "/"
	}
	return ObjectPath{Prefix: prefix, Object: parts[n-7], Folder: folder, File: parts[n-1]}, true
}

// StreamPrefix is the root path of the stream a file belongs to: its name
// without the layout's tail <object folder>/YYYY/MM/DD/HH/mm/<file>, or,
// for a name of another shape, its directory. It is "" or ends in '/'.
func StreamPrefix(name string) string {
	if p, ok := ParseObjectPath(name); ok {
		return p.Prefix
	}
	dir := path.Dir(name)
	if dir == "." || dir == "/" {
		return ""
	}
	return dir + "/"
}
