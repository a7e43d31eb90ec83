import os
import sys

if os.name:
	print(sys.platform)
	if True:
		import tabs_inside
