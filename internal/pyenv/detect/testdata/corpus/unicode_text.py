# Commentaire : données « accentuées » — 日本語のコメント
import unicodedata

greeting = "héllo wörld — ✓"
print(unicodedata.name("✓"), greeting.upper(), f"{greeting!a} {'ü'.encode()}")
