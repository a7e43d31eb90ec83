package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// codeHash is the sha256 of a request's files: for each file in order, its
// path length, path, data length and data, so that no two different file
// sets hash alike.
func codeHash(files []File) string {
	h := sha256.New()
	var n [8]byte
	for _, f := range files {
		binary.BigEndian.PutUint64(n[:], uint64(len(f.Path)))
		h.Write(n[:])
		h.Write([]byte(f.Path))
		binary.BigEndian.PutUint64(n[:], uint64(len(f.Data)))
		h.Write(n[:])
		h.Write(f.Data)
	}
	return hex.EncodeToString(h.Sum(nil))
}
