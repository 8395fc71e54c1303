package task

import "fmt"

// CheckID returns a *FieldError naming "id" when id is not a task id, in
// the words the API uses for a malformed id in a path.
func CheckID(id string) *FieldError {
	if ValidID(id) {
		return nil
	}
	return &FieldError{Field: "id", Message: fmt.Sprintf("%q is not a task id (26 characters of Crockford base32, as in 01J0ABCDEFGHJKMNPQRSTVWXYZ)", Shorten(id, 64))}
}
