package kittools

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
)

// toolsMod and toolsSum are byte-for-byte copies of kshard's hack/tools
// go.mod and go.sum (hack/tools/pin.sh writes both; a test keeps them
// equal). hack/tools is a nested module, so it is not in the module zip a
// user downloads; carrying its files here lets Ensure write the
// module out and build from the module cache alone. They are not named
// go.mod/go.sum because a go.mod would make this folder a module of its own.
var (
	//go:embed tools.mod
	toolsMod []byte
	//go:embed tools.sum
	toolsSum []byte
)

// toolsModule is the go.mod and go.sum the binaries are built from.
type toolsModule struct {
	mod, sum []byte
	// dir is where the module already is on disk (KSHARD_TOOLS_DIR); empty
	// for the carried module, which is written out before building.
	dir string
	// source names the module in error messages.
	source string
}

// loadTools returns the tools module named by KSHARD_TOOLS_DIR, or the one
// this package carries.
func loadTools() (toolsModule, error) {
	dir := os.Getenv(EnvToolsDir)
	if dir == "" {
		return toolsModule{mod: toolsMod, sum: toolsSum, source: "carried by github.com/kshard/kshard/internal/kittools"}, nil
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return toolsModule{}, fmt.Errorf("%s=%s: reading the tools module: %w (unset it to use the module kshard carries)", EnvToolsDir, dir, err)
	}
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil {
		return toolsModule{}, fmt.Errorf("%s=%s: reading the tools module: %w (unset it to use the module kshard carries)", EnvToolsDir, dir, err)
	}
	return toolsModule{mod: mod, sum: sum, dir: dir, source: filepath.Join(dir, "go.mod")}, nil
}

// write puts the module's go.mod and go.sum into dir, replacing what a
// previous, interrupted write may have left.
func (t toolsModule) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("writing the tools module: %w (set %s to a writable directory)", err, envCacheDir)
	}
	for name, data := range map[string][]byte{"go.mod": t.mod, "go.sum": t.sum} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("writing the tools module: %w (set %s to a writable directory)", err, envCacheDir)
		}
	}
	return nil
}
