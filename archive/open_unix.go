//go:build unix

package archive

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openDay opens the file name in the queue directory dir of root for
// reading and appending, creating either when missing (the directory
// 0700, the file 0600), and follows no link below root: the directory is
// opened relative to root with O_NOFOLLOW, the file relative to the
// directory with O_NOFOLLOW, so a link planted in the archive in place of
// either (or swapped in between) is refused, never written through. The
// file must be a regular file of one link (a hard link to a file
// elsewhere is refused too). newDir and newFile say what was created;
// the directory is returned open to sync its entries. root itself may be
// a link: the administrator's choice.
func openDay(root, dir, name string) (f, d *os.File, newDir, newFile bool, err error) {
	rfd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, false, false, fmt.Errorf("archive: open %s: %w", root, err)
	}
	defer unix.Close(rfd)
	switch err := unix.Mkdirat(rfd, dir, 0o700); {
	case err == nil:
		newDir = true
	case !errors.Is(err, unix.EEXIST):
		return nil, nil, false, false, fmt.Errorf("archive: make %s: %w", dir, err)
	}
	dfd, err := unix.Openat(rfd, dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return nil, nil, false, false, fmt.Errorf("archive: %s in %s is not a directory (a link?): refused", dir, root)
	}
	if err != nil {
		return nil, nil, false, false, fmt.Errorf("archive: open %s: %w", dir, err)
	}
	d = os.NewFile(uintptr(dfd), dir)
	flags := unix.O_RDWR | unix.O_APPEND | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(dfd, name, flags|unix.O_CREAT|unix.O_EXCL, 0o600)
	if err == nil {
		newFile = true
	} else if errors.Is(err, unix.EEXIST) {
		fd, err = unix.Openat(dfd, name, flags|unix.O_NONBLOCK, 0) // a FIFO planted there does not block
	}
	if errors.Is(err, unix.ELOOP) {
		d.Close()
		return nil, nil, false, false, fmt.Errorf("archive: %s/%s is a link: refused", dir, name)
	}
	if err != nil {
		d.Close()
		return nil, nil, false, false, fmt.Errorf("archive: open %s/%s: %w", dir, name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		d.Close()
		return nil, nil, false, false, fmt.Errorf("archive: open %s/%s: %w", dir, name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 {
		unix.Close(fd)
		d.Close()
		return nil, nil, false, false, fmt.Errorf("archive: %s/%s is not a file of the archive's own (not a regular file, or linked elsewhere): refused", dir, name)
	}
	if !newFile {
		// Back to blocking writes (O_NONBLOCK was for a FIFO's open only).
		if err := unix.SetNonblock(fd, false); err != nil {
			unix.Close(fd)
			d.Close()
			return nil, nil, false, false, fmt.Errorf("archive: open %s/%s: %w", dir, name, err)
		}
	}
	return os.NewFile(uintptr(fd), dir+"/"+name), d, newDir, newFile, nil
}
