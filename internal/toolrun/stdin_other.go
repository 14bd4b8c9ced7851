//go:build !linux

package toolrun

import "os"

// sealedCopy is data in an unnamed temporary file, open for reading at
// its start: a copy, never the record itself (no memory files here).
func sealedCopy(name string, data []byte) (*os.File, error) {
	f, err := os.CreateTemp("", "capflow-"+name+"-")
	if err != nil {
		return nil, err
	}
	_ = os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, 0); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
