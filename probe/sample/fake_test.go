package sample

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mapReader serves files from a map; missing names give fs.ErrNotExist like os.ReadFile.
func mapReader(m map[string][]byte) ReadFileFunc {
	return func(name string) ([]byte, error) {
		b, ok := m[name]
		if !ok {
			return nil, fmt.Errorf("open %s: %w", name, fs.ErrNotExist)
		}
		return b, nil
	}
}

// treeReader loads every file under testdata/dir into a map keyed by prefix + relative path.
func treeReader(t *testing.T, dir, prefix string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	root := filepath.Join("testdata", dir)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		m[prefix+strings.TrimPrefix(p, root)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
