// Package manager is a fixture importing controller.
package manager

import "example.com/fixture/controller"

// Manager holds a gate.
type Manager struct{ Gate *controller.Gate }
