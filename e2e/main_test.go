package e2e_test

import (
	"testing"

	"github.com/kshard/kshard/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
