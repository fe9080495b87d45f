package store

import (
	"fmt"
	"path/filepath"
	"strings"
)

// maxComponent bounds one path component; most filesystems refuse longer.
const maxComponent = 255

// component checks one path element taken from an artifact. It refuses
// rather than rewrites, so that two different names never map to the same
// path.
func component(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%s: expected a name, got an empty one", what)
	case s == "." || s == "..":
		return fmt.Errorf("%s %q: expected a name, got a relative path element", what, s)
	case len(s) > maxComponent:
		return fmt.Errorf("%s %.40q...: expected at most %d bytes, got %d", what, s, maxComponent, len(s))
	}
	for _, r := range s {
		// ':' is a drive or stream separator on Windows.
		if r < 0x20 || r == 0x7f || r == '/' || r == '\\' || r == ':' {
			return fmt.Errorf("%s %q: expected no separators or control characters, found %q", what, s, r)
		}
	}
	return nil
}

// repoDirs returns the directories naming a repository: owner and name of
// a Hub repository, a single legacy name, or "url" for a plain URL.
func repoDirs(repo string) ([]string, error) {
	if repo == "" {
		return []string{"url"}, nil
	}
	parts := strings.Split(repo, "/")
	if len(parts) > 2 {
		return nil, fmt.Errorf("repository %q: expected owner/name", repo)
	}
	for _, p := range parts {
		if err := component("repository "+repo+": element", p); err != nil {
			return nil, err
		}
	}
	return parts, nil
}

// commitDir returns the directory naming a commit, "-" when there is none.
func commitDir(commit string) (string, error) {
	if commit == "" {
		return "-", nil
	}
	if err := component("commit", commit); err != nil {
		return "", err
	}
	return commit, nil
}

// baseName returns the name a file is linked under: its base name. The
// name may be a path inside its repository, but none of its elements may
// climb out of it.
func baseName(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("file name: expected a name, got an empty one")
	}
	if strings.HasPrefix(name, "/") || strings.HasPrefix(name, `\`) || filepath.IsAbs(name) || filepath.VolumeName(name) != "" {
		return "", fmt.Errorf("file name %q: expected a path inside the repository, got an absolute one", name)
	}
	parts := strings.Split(name, "/")
	for _, p := range parts[:len(parts)-1] {
		if p == "" || p == "." || p == ".." || strings.ContainsAny(p, `\:`) {
			return "", fmt.Errorf("file name %q: expected a path inside the repository, found element %q", name, p)
		}
	}
	base := parts[len(parts)-1]
	if err := component("file name "+name+": base", base); err != nil {
		return "", err
	}
	return base, nil
}

// checkSHA256 returns a digest in lowercase, or an error when it is not 64
// hex digits. An empty digest means unknown and stays empty.
func checkSHA256(file, sum string) (string, error) {
	if sum == "" {
		return "", nil
	}
	sum = strings.ToLower(sum)
	if len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" {
		return "", fmt.Errorf("%s: expected sha256 as 64 hex digits, got %q", file, sum)
	}
	return sum, nil
}

// within reports whether p lies strictly below root, both clean absolute
// paths.
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == "." || filepath.IsAbs(rel) {
		return false
	}
	return rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
