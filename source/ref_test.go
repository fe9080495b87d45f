package source

import (
	"errors"
	"strings"
	"testing"
)

func TestParseRef(t *testing.T) {
	commit := strings.Repeat("0a", 20)
	tests := []struct {
		in   string
		want Ref
	}{
		{"model.gguf", Ref{Kind: KindLocal, Path: "model.gguf"}},
		{"/models/x-00001-of-00002.gguf", Ref{Kind: KindLocal, Path: "/models/x-00001-of-00002.gguf"}},
		{`C:\models\x.gguf`, Ref{Kind: KindLocal, Path: `C:\models\x.gguf`}},
		{"https://example.com/m/x.gguf", Ref{Kind: KindURL, URL: "https://example.com/m/x.gguf"}},
		{"HTTP://example.com/x.gguf", Ref{Kind: KindURL, URL: "HTTP://example.com/x.gguf"}},
		{"hf:bartowski/Llama-3.2-1B-Instruct-GGUF", Ref{Kind: KindHF, Repo: "bartowski/Llama-3.2-1B-Instruct-GGUF", Revision: "main"}},
		{"hf:owner/repo:Q4_K_M", Ref{Kind: KindHF, Repo: "owner/repo", Tag: "Q4_K_M", Revision: "main"}},
		{"hf:owner/repo:UD-Q4_K_XL@v1.0", Ref{Kind: KindHF, Repo: "owner/repo", Tag: "UD-Q4_K_XL", Revision: "v1.0"}},
		{"hf:owner/repo/sub/dir/m-Q8_0.gguf@refs/pr/3", Ref{Kind: KindHF, Repo: "owner/repo", File: "sub/dir/m-Q8_0.gguf", Revision: "refs/pr/3"}},
		{"hf:owner/repo@" + strings.ToUpper(commit), Ref{Kind: KindHF, Repo: "owner/repo", Revision: commit}},
	}
	for _, tt := range tests {
		got, err := ParseRef(tt.in)
		if err != nil {
			t.Errorf("ParseRef(%q): %v", tt.in, err)
			continue
		}
		tt.want.Raw = tt.in
		if got != tt.want {
			t.Errorf("ParseRef(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestParseRefErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "empty"},
		{"  ", "empty"},
		{"hf:", "expected OWNER/REPO"},
		{"hf:justarepo", "expected OWNER/REPO"},
		{"hf:owner/repo/", "should end in .gguf"},
		{"hf:owner/repo/README.md", "should end in .gguf"},
		{"hf:owner/repo/a/../b.gguf", "'..'"},
		{"hf:owner/repo/m.gguf:Q4_K_M", "a quant tag follows OWNER/REPO"},
		{"hf:owner/repo:", "quant tag"},
		{"hf:owner/repo:Q4 K", "quant tag"},
		{"hf:owner/repo@", "nothing follows '@'"},
		{"hf:owner/repo@a b", "spaces"},
		{"hf:owner/re--po", "not a repository id"},
		{"hf:own er/repo", "not a repository id"},
		{"hf://owner/repo", "hf:// is not supported"},
		{"s3://bucket/m.gguf", `scheme "s3"`},
		{"https://", "no host"},
		{"https://example.com/", "no file path"},
		{"https://user:secret@example.com/", "no file path"},
	}
	for _, tt := range tests {
		_, err := ParseRef(tt.in)
		if err == nil {
			t.Errorf("ParseRef(%q): no error", tt.in)
			continue
		}
		if !errors.Is(err, ErrBadRef) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "accepted forms: a local path") {
			t.Errorf("ParseRef(%q) error %q, want ErrBadRef saying %q and the accepted forms", tt.in, err, tt.want)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseRef(%q) error shows the password: %q", tt.in, err)
		}
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://h/x.gguf", "https://h/x.gguf"},
		{"https://u:p@h/x.gguf?sig=abc#f", "https://REDACTED@h/x.gguf?REDACTED"},
	}
	for _, tt := range tests {
		if got := redactURL(tt.in); got != tt.want {
			t.Errorf("redactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
