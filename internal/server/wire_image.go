package server

import v1 "github.com/hutchdev/hutch/api/v1"

// This file maps images and secrets to their api/v1 wire form.

func toImage(i ImageInfo) v1.Image {
	return v1.Image{ID: i.ID, Name: i.Name, Packages: i.Packages, CreatedAt: i.CreatedAt, SizeBytes: i.SizeBytes}
}

// toImages maps a list; nil becomes empty ("images": [], as before).
func toImages(in []ImageInfo) []v1.Image {
	out := make([]v1.Image, len(in))
	for i, img := range in {
		out[i] = toImage(img)
	}
	return out
}
