# -*- coding: latin-1 -*-
import locale
s = "café"
print(locale.getlocale(), s)
