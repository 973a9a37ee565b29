package kittools

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hackTools is kshard's tools module, the source of truth for the pins,
// relative to this package in a checkout.
const hackTools = "../../hack/tools"

func TestCarriedToolsModuleMatchesHackTools(t *testing.T) {
	for name, carried := range map[string][]byte{"go.mod": toolsMod, "go.sum": toolsSum} {
		want, err := os.ReadFile(filepath.Join(hackTools, name))
		if os.IsNotExist(err) {
			t.Skipf("%s is not here (not a kshard checkout); nothing to compare", hackTools)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(carried, want) {
			t.Errorf("tools.%s differs from hack/tools/%s: run hack/tools/pin.sh (it copies both)", name[3:], name)
		}
	}
}

func TestCarriedToolsModuleKeepsTheCacheKey(t *testing.T) {
	// The cache entry's name comes from the module's bytes, so building from
	// the carried module reuses binaries built from hack/tools and back.
	t.Setenv(EnvToolsDir, hackTools)
	fromDir, err := loadTools()
	if err != nil {
		t.Skipf("no hack/tools here (not a kshard checkout): %v", err)
	}
	t.Setenv(EnvToolsDir, "")
	carried, err := loadTools()
	if err != nil {
		t.Fatal(err)
	}
	if carried.dir != "" {
		t.Fatalf("carried module has dir %q, want none", carried.dir)
	}
	v1, k1, err := toolsVersion(fromDir)
	if err != nil {
		t.Fatal(err)
	}
	v2, k2, err := toolsVersion(carried)
	if err != nil {
		t.Fatal(err)
	}
	if v1 != v2 || k1 != k2 {
		t.Fatalf("hack/tools gives %s-%s, the carried module %s-%s: the cache would be rebuilt", v1, k1, v2, k2)
	}
	if v2 == "" || len(k2) != 12 {
		t.Fatalf("version %q key %q: want a version and a 12-digit key", v2, k2)
	}
}

func TestWrittenToolsModuleLoadsBack(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tools")
	carried := toolsModule{mod: toolsMod, sum: toolsSum}
	if err := carried.write(dir); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvToolsDir, dir)
	back, err := loadTools()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.mod, toolsMod) || !bytes.Equal(back.sum, toolsSum) || back.dir != dir {
		t.Fatalf("module written to %s does not read back as written", dir)
	}
}

func TestToolsDirWithoutGoModIsNamed(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvToolsDir, dir)
	_, err := loadTools()
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(EnvToolsDir+"="+dir)) {
		t.Fatalf("err = %v, want one naming %s=%s", err, EnvToolsDir, dir)
	}
}

// Each pin of make compat's matrix lives in hack/tools/compat/v1.MINOR and
// must pin that minor; a pin copied to the wrong directory would test
// another version under this one's name.
func TestCompatPinsMatchTheirDirectory(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(hackTools, "compat", "v1.*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Skipf("no %s/compat pins here (not a kshard checkout)", hackTools)
	}
	for _, dir := range dirs {
		t.Setenv(EnvToolsDir, dir)
		tools, err := loadTools()
		if err != nil {
			t.Errorf("%s: %v", dir, err)
			continue
		}
		version, _, err := toolsVersion(tools)
		if err != nil {
			t.Errorf("%s: %v", dir, err)
			continue
		}
		if want := filepath.Base(dir) + "."; !strings.HasPrefix(version, want) {
			t.Errorf("%s pins k8s.io/kubernetes %s, want %sN: rerun hack/tools/pin.sh -o %s with that minor's newest patch", dir, version, want, dir)
		}
	}
}
