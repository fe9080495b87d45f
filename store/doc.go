// Package store downloads model files into a content-addressed store on
// local disk and installs them under their original names, so that
// llama-server can be pointed at them.
//
// # Layout
//
// Everything lives under one root directory (see [DefaultRoot]):
//
//	blobs/sha256/<64 hex>                   verified file contents, mode 0444
//	partial/<key>.part                      a download in progress
//	partial/<key>.json                      what that part belongs to: URL
//	                                        (query removed), size, sha256
//	locks/<key>.lock                        one lock per blob or part
//	models/<owner>/<name>/<commit>/<file>   hard link (or symlink) to a blob
//	manifests/<owner>/<name>/<commit>/<first file>.json
//	verified/<64 hex>.json                  the blob's digest bound to its
//	                                        inode, size, mtime and ctime
//
// The key of a file whose sha256 is known is that hash; for a plain URL
// without a known hash it is derived from the URL. Files downloaded from a
// URL without a repository go under models/url/-/.
//
// A blob appears only by renaming a finished, verified part into blobs/,
// so a crash at any moment leaves either no blob or a complete one; a part
// is never presented as installed. Files are linked under models/ by their
// base name because llama.cpp finds the other shards of a split model
// (name-00001-of-00003.gguf) by name in the directory of the first one. A
// manifest is written, atomically, only after every file of an artifact is
// verified and linked; it is what marks the artifact as installed.
//
// Names taken from an artifact (repository, commit, file names) are checked
// component by component; one that could leave the root ("..", an absolute
// path, a separator inside a component) is refused with an error.
//
// A blob is verified when it is installed and again, by hashing it, once
// its inode, size, modification or status-change time differ from those
// recorded in verified/; one whose content changed is removed and
// downloaded again. Nothing below the root is reached through a symbolic
// link except the store's own links under models/ (see LinkError).
//
// Several pulls may run at once, in one process or in several: each file is
// downloaded under an exclusive lock, and whoever waits for it finds the
// blob present afterwards.
package store
