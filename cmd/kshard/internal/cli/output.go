package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// writeDoc prints v as the document -o asks for: JSON (indented, as
// before) or YAML, with the same field names (sigs.k8s.io/yaml converts the
// JSON, as kubectl does).
func writeDoc(w io.Writer, output string, v any) error {
	switch output {
	case outputJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case outputYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	default:
		return fmt.Errorf("writeDoc: output %q is not a document", output) // a bug: callers check structured()
	}
}
