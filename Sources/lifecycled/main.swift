print("lifecycled")
