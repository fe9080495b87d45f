package headroom_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The README is read in five minutes: at most this many lines, and no
// table cell longer than a few sentences.
const (
	readmeMaxLines = 150
	readmeMaxCell  = 300
	// firstScreen is what a terminal or a repository page shows before
	// any scrolling.
	firstScreen = 25
)

// TestReadme holds the README to its limits, its first screen to the
// install line and the two commands a clone starts with, and CI to
// running those two commands.
func TestReadme(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > readmeMaxLines {
		t.Errorf("README.md has %d lines; at most %d (move the rest to docs/)", len(lines), readmeMaxLines)
	}
	for i, line := range lines {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		for _, cell := range strings.Split(strings.Trim(line, "|"), " | ") {
			if n := len([]rune(strings.TrimSpace(cell))); n > readmeMaxCell {
				t.Errorf("README.md line %d: a table cell of %d characters; at most %d", i+1, n, readmeMaxCell)
			}
		}
	}

	var commands []string
	in := false
	for _, line := range lines[:min(firstScreen, len(lines))] {
		switch {
		case strings.HasPrefix(line, "```"):
			in = !in
		case in && strings.TrimSpace(line) != "":
			commands = append(commands, strings.TrimSpace(line))
		}
	}
	want := []string{
		"go install github.com/headroom-llm/headroom/cmd/headroom@latest",
		"go run ./cmd/headroom recommend",
		"go test ./...",
	}
	if !slices.Equal(commands, want) {
		t.Errorf("README.md's first %d lines give the commands %q; want the install line, then the main command and the tests: %q", firstScreen, commands, want)
	}

	ci, err := os.ReadFile(".ci/run")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range want[1:] {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(c) + `( |$)`).Match(ci) {
			t.Errorf(".ci/run does not run the README's %q", c)
		}
	}
}

// TestDocLinks: every relative link of the README and docs/ names a file
// of the repository.
func TestDocLinks(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	fence := regexp.MustCompile("(?s)```.*?```")
	for _, f := range append([]string{"README.md"}, files...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(fence.ReplaceAllString(string(data), ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), target)); err != nil {
				t.Errorf("%s links %s, which is not there", f, target)
			}
		}
	}
}
