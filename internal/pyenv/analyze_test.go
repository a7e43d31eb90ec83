package pyenv

import (
	"context"
	"slices"
	"testing"

	"github.com/pyexec/pyexec/internal/pyenv/detect"
)

func TestAnalyzeInJail(t *testing.T) {
	run := jail(t)
	files := []detect.File{
		{Path: "main.py", Data: []byte(`import os, sys, json
import numpy as np
from helper import greet
from . import sibling
import pkg.sub
from PIL import Image
import yaml
import subprocess as sp
try:
    import ujson as json
except ImportError:
    pass
try:
    from lxml import etree
except (ValueError, ModuleNotFoundError):
    etree = None
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    import pandas
__import__("toml")
sp.run(["true"])
eval("1")
`)},
		{Path: "helper.py", Data: []byte("import requests\ndef greet(): pass\n")},
		{Path: "pkg/__init__.py", Data: []byte("")},
		{Path: "pkg/sub.py", Data: []byte("import attr\n")},
		{Path: "broken.py", Data: []byte("def (:\n")},
		{Path: "notes.txt", Data: []byte("import fake\n")},
	}
	want := []Requirement{
		{Name: "numpy", Spec: "numpy"}, {Name: "pillow", Spec: "pillow"}, {Name: "pyyaml", Spec: "pyyaml"},
		{Name: "ujson", Spec: "ujson", Optional: true}, {Name: "lxml", Spec: "lxml", Optional: true},
		{Name: "toml", Spec: "toml"}, {Name: "requests", Spec: "requests"}, {Name: "attrs", Spec: "attrs"},
	}
	a := NewAnalyzer(run, AnalyzerConfig{})
	for _, v := range []string{"3.8", "3.9", "3.10", "3.11", "3.12", "3.13"} {
		t.Run(v, func(t *testing.T) {
			in := python(t, v)
			an, err := a.Analyze(context.Background(), in, files, "main.py", true)
			if err != nil {
				t.Fatal(err)
			}
			got := DefaultImportMap().Requirements(an.Imports)
			for i := range got {
				got[i].Source = 0
			}
			slices.SortFunc(got, func(a, b Requirement) int { return cmpString(a.Name, b.Name) })
			w := slices.Clone(want)
			slices.SortFunc(w, func(a, b Requirement) int { return cmpString(a.Name, b.Name) })
			if !slices.Equal(got, w) {
				t.Errorf("requirements\n got %+v\nwant %+v", got, w)
			}
			if len(an.SyntaxErrors) != 1 || an.SyntaxErrors[0].File != "broken.py" {
				t.Errorf("syntax errors %+v, want one in broken.py", an.SyntaxErrors)
			}
			if !slices.ContainsFunc(an.Calls, func(c detect.Call) bool { return c.Name == "subprocess.run" && c.Line == 21 }) {
				t.Errorf("calls %+v lack subprocess.run at line 21", an.Calls)
			}
		})
	}
	t.Run("cached", func(t *testing.T) {
		in := python(t, "")
		first, err := a.Analyze(context.Background(), in, files, "main.py", true)
		if err != nil {
			t.Fatal(err)
		}
		second, err := a.Analyze(context.Background(), in, files, "main.py", true)
		if err != nil || first != second {
			t.Errorf("second analysis of the same project was not served from the cache (%v)", err)
		}
	})
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
