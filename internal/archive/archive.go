// Package archive is Hutch's one tar implementation, shared by hutchd and the agent: it writes
// a directory tree as an uncompressed tar and extracts such a tar into a directory, in two
// formats, tree archives for backups (api/agent.md "Backups": Write, WriteRoot, Extract) and
// snapshot layers (WriteLayer, ExtractLayer). Both directions stream: an archive is never held
// in memory or in a temporary file. Both formats store a file with holes as a sparse entry
// (internal/sparse), and both extractors refuse the same unsafe names (checkName).
//
// Files by operation: write.go (tree archives), extract.go and swap.go (their all-or-nothing
// extraction), resolve.go (the directories a backup may name), layer.go and layer_extract.go
// (layers), entry.go (what both share: names, sparse entries, holes).
//
// What a tree archive holds: the directory itself as "./" (its mode, owner and mtime), then every
// entry below it in lexical order, named relative to the directory with "/" separators:
// regular files (content, permission bits including setuid/setgid/sticky, uid/gid, mtime in
// whole seconds), directories, symlinks (as links, never followed; any target) and hard links
// (a regular file with several links inside the tree is stored once; the other names are tar
// hard-link entries naming the first). Sockets, FIFOs and device files are skipped and counted
// in Stats.Skipped. Extended attributes, ACLs and atimes are not kept. A regular file with
// holes is stored by its data extents alone (internal/sparse's sparse entries) and extracted
// sparse again, so its apparent size costs nothing.
//
// Excludes (Options.Excludes) are glob patterns matched against each entry's path relative to
// the directory, with the syntax of Go's path.Match ('*' and '?' do not cross '/', '[a-z]'
// classes, '\' escapes; "**" is the same as "*"):
//   - a pattern without '/' matches the entry's base name at any depth: "node_modules",
//     "*.log", ".cache";
//   - a pattern with '/' matches the whole relative path from the top: "build/*.o",
//     "packages/*/dist" (a leading "/" or "./" is ignored: "/dist" is only the top-level dist);
//   - a trailing '/' restricts the pattern to directories: "tmp/";
//   - an excluded directory is skipped with everything below it.
//
// Options.Paths are exact relative paths to leave out (what `git ls-files --ignored` prints).
//
// Extraction (Extract) refuses unsafe entries with VALIDATION_FAILED naming the entry: absolute
// names, names with a ".." element, names that go through a symlink the archive created, hard
// links whose target is outside the archive or not a regular file, and device files.
//
// What a layer holds, and what ExtractLayer refuses, is in WriteLayer's and ExtractLayer's docs.
package archive

import "path/filepath"

// rel2abs joins a relative slash path to dir.
func rel2abs(dir, rel string) string {
	if rel == "." || rel == "" {
		return dir
	}
	return filepath.Join(dir, filepath.FromSlash(rel))
}
