import re

def f():
    
    return re.compile("x")
import after_formfeed
