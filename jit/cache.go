package jit

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
)

// EnvCacheDir names the environment variable that overrides the disk cache
// folder (default: the user cache dir's "kittens" folder).
const EnvCacheDir = "KITTENS_CACHE_DIR"

// CacheDir returns the folder of the disk cache, or "" when there is none:
// without $KITTENS_CACHE_DIR and a user cache dir (neither $XDG_CACHE_HOME
// nor $HOME set, as under some services) kernels are compiled afresh in
// each process. A shared folder such as /tmp would not do: a CUBIN that
// another user left there under a kernel's key would run in this process.
func CacheDir() string {
	if d := os.Getenv(EnvCacheDir); d != "" {
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(base, "kittens")
}

// An entry on disk is magic, the SHA-256 of the CUBIN, then the CUBIN. A
// truncated or damaged file fails the hash and is rebuilt.
var magic = []byte("KITTENS-CUBIN-1\n")

func cachePath(dir, key string) string { return filepath.Join(dir, key+".cubin") }

func readCache(key string) ([]byte, bool) {
	dir := CacheDir()
	if dir == "" {
		return nil, false
	}
	b, err := os.ReadFile(cachePath(dir, key))
	if err != nil || len(b) < len(magic)+sha256.Size || !bytes.Equal(b[:len(magic)], magic) {
		return nil, false
	}
	sum, body := b[len(magic):len(magic)+sha256.Size], b[len(magic)+sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) || len(body) == 0 {
		return nil, false
	}
	return body, true
}

// writeCache stores a CUBIN atomically (temporary file, then rename). A
// cache that cannot be written only costs a recompile, so errors are dropped.
func writeCache(key string, cubin []byte) {
	dir := CacheDir()
	if dir == "" || os.MkdirAll(dir, 0o755) != nil {
		return
	}
	f, err := os.CreateTemp(dir, key+".tmp*")
	if err != nil {
		return
	}
	sum := sha256.Sum256(cubin)
	_, err = f.Write(append(append(append([]byte(nil), magic...), sum[:]...), cubin...))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil || os.Rename(f.Name(), cachePath(dir, key)) != nil {
		os.Remove(f.Name())
	}
}
