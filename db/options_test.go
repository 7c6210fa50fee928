package db

import (
	"reflect"
	"testing"
	"time"
)

// Each store's Options field is reached from db.Options: OpenWith hands
// the SQLite store and the PostgreSQL store every field of theirs that
// its caller set, under the same name, and a field db.Options has is
// read by at least one store.
func TestOptionsReachEachStore(t *testing.T) {
	t.Parallel()
	var o Options
	v := reflect.ValueOf(&o).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("NORMAL")
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(7 * time.Second))
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		default:
			t.Fatalf("db.Options.%s: a kind this test does not fill (%s)", v.Type().Field(i).Name, f.Kind())
		}
	}
	read := map[string]bool{}
	for _, store := range []any{o.sqlite(), o.postgres()} {
		s := reflect.ValueOf(store)
		for i := range s.NumField() {
			name := s.Type().Field(i).Name
			read[name] = true
			want := v.FieldByName(name)
			if !want.IsValid() {
				t.Errorf("%s.%s has no field of that name in db.Options", s.Type(), name)
				continue
			}
			if got := s.Field(i); got.IsZero() || got.Convert(want.Type()).Interface() != want.Interface() {
				t.Errorf("%s.%s = %v, want %v", s.Type(), name, got, want)
			}
		}
	}
	for i := range v.NumField() {
		if name := v.Type().Field(i).Name; !read[name] {
			t.Errorf("db.Options.%s is read by neither store", name)
		}
	}
}
